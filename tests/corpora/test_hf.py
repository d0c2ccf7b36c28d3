"""`factory ingest` reads the Hugging Face hub copies docs/corpora.md names, offline, from local folders
shaped like them, and builds the same questions as from the official files of the same records.

The folders are made here from real records of ../shared/corpora, in the layouts the hub copies have:

- ``hotpotqa/hotpot_qa``, config ``distractor``: a repository snapshot (``hf download``): README.md
  whose ``configs`` name ``distractor/validation-*.parquet``; columns ``id``, ``context {title,
  sentences}``, ``supporting_facts {title, sent_id}`` (the dataset card's ``dataset_info``);
- ``ohjoonhee/2WikiMultihopQA``: what ``load_dataset`` returns, saved with ``save_to_disk``; columns
  ``_id``, ``context {title, content}``, ``supporting_facts {title, sent_id}``, ``evidences {fact,
  relation, entity}`` (its card);
- ``dgslibisey/MuSiQue``: a snapshot holding the official JSONL file under its release name
  (``musique_ans_v1.0_dev.jsonl``: the split ``validation``).
"""

import json
import subprocess
import sys

import pyarrow.parquet as pq
import yaml

from factory.corpora.ingest import ingest_sources
from factory.params.config import Params

N = 8  # records per dataset (the first 8 of the 2Wiki sample hold none of its 3 bad records)


def _records(corpora):
    return {
        "hotpotqa": json.loads((corpora / "hotpotqa" / "dev_sample.json").read_text())[:N],
        "2wikimultihopqa": json.loads((corpora / "2wikimultihopqa" / "dev_sample.json").read_text())[:N],
        "musique": (corpora / "musique" / "dev_sample.jsonl").read_text().splitlines()[:N],
    }


def _columns(pairs, first, second):
    return {first: [a for a, _ in pairs], second: [b for _, b in pairs]}


def _hotpot_snapshot(folder, records):
    import datasets

    rows = [
        {
            "id": r["_id"],
            "question": r["question"],
            "answer": r["answer"],
            "type": r["type"],
            "level": r["level"],
            "supporting_facts": _columns(r["supporting_facts"], "title", "sent_id"),
            "context": _columns(r["context"], "title", "sentences"),
        }
        for r in records
    ]
    (folder / "distractor").mkdir(parents=True)
    datasets.Dataset.from_list(rows).to_parquet(
        str(folder / "distractor" / "validation-00000-of-00001.parquet")
    )
    card = {
        "configs": [
            {
                "config_name": "distractor",
                "data_files": [{"split": "validation", "path": "distractor/validation-*"}],
            }
        ]
    }
    (folder / "README.md").write_text(f"---\n{yaml.safe_dump(card)}---\n# HotpotQA\n")


def _twowiki_saved(folder, records):
    import datasets

    rows = [
        {
            "_id": r["_id"],
            "type": r["type"],
            "question": r["question"],
            "context": _columns(r["context"], "title", "content"),
            "supporting_facts": _columns(r["supporting_facts"], "title", "sent_id"),
            "evidences": {
                "fact": [s for s, _, _ in r["evidences"]],
                "relation": [p for _, p, _ in r["evidences"]],
                "entity": [o for _, _, o in r["evidences"]],
            },
            "answer": r["answer"],
        }
        for r in records
    ]
    datasets.DatasetDict({"validation": datasets.Dataset.from_list(rows)}).save_to_disk(str(folder))


def _musique_snapshot(folder, lines):
    folder.mkdir()
    (folder / "musique_ans_v1.0_dev.jsonl").write_text("\n".join(lines) + "\n")


def test_factory_ingest_reads_the_hub_layouts_offline_as_the_official_files(tmp_path, corpora):
    records = _records(corpora)
    hub = tmp_path / "hub"
    _hotpot_snapshot(hub / "hotpot_qa", records["hotpotqa"])
    _twowiki_saved(hub / "2WikiMultihopQA", records["2wikimultihopqa"])
    _musique_snapshot(hub / "MuSiQue", records["musique"])
    params = {
        "corpora": {},
        "ingest": {
            "hf": [
                {
                    "dataset": "hotpotqa",
                    "path": str(hub / "hotpot_qa"),
                    "name": "distractor",
                    "split": "validation",
                },
                {"dataset": "2wikimultihopqa", "path": str(hub / "2WikiMultihopQA"), "split": "validation"},
                {"dataset": "musique", "path": str(hub / "MuSiQue"), "split": "validation"},
            ]
        },
    }
    project = tmp_path / "project"
    project.mkdir()
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    run = subprocess.run(
        [sys.executable, "-m", "factory.cli", "ingest"], cwd=project, capture_output=True, text=True
    )  # the environment is offline (tests/conftest.py: HF_DATASETS_OFFLINE=1, HF_HUB_OFFLINE=1)
    assert run.returncode == 0, run.stderr

    official = tmp_path / "official"
    official.mkdir()
    files = {
        "hotpotqa": official / "hotpot_dev.json",
        "2wikimultihopqa": official / "2wiki_dev.json",
        "musique": official / "musique_dev.jsonl",
    }
    files["hotpotqa"].write_text(json.dumps(records["hotpotqa"]))
    files["2wikimultihopqa"].write_text(json.dumps(records["2wikimultihopqa"]))
    files["musique"].write_text("\n".join(records["musique"]) + "\n")
    expected = ingest_sources(Params(corpora={d: [str(f)] for d, f in files.items()})).questions

    got = pq.read_table(project / "data/interim/questions.parquet").to_pylist()
    strip = lambda q: {k: v for k, v in q.items() if k != "source_file"}  # noqa: E731
    assert [strip(q) for q in got] == [strip(q) for q in expected]
    assert {q["dataset"] for q in got} == {"hotpotqa", "2wikimultihopqa", "musique"}
    assert all(q["evidences"] for q in got if q["dataset"] == "2wikimultihopqa")  # the triplets came through
    metrics = json.loads((project / "metrics/ingest.json").read_text())
    assert metrics["total"]["read"] == metrics["total"]["ingested"] == 3 * N
    assert (project / "data/interim/quarantine.jsonl").read_text() == ""


def test_evidence_columns_the_builder_cannot_read_quarantine_the_record_by_field(corpora):
    from factory.corpora import corpus

    record = json.loads((corpora / "2wikimultihopqa" / "dev_sample.json").read_text())[0]
    row = corpus("2wikimultihopqa").hub_row({**record, "evidences": {"head": ["a"], "tail": ["b"]}})
    assert row["evidences"] == {"head": ["a"], "tail": ["b"]}  # left as it is: not a guess
    from factory.corpora import twowiki
    from factory.corpora.pool import PassagePool
    from factory.utils.errors import BadRecord

    try:
        twowiki.build(row, "hub[0]", "hub", PassagePool())
    except BadRecord as bad:
        assert bad.field == "evidences" and "expected list" in bad.reason
    else:
        raise AssertionError("an unreadable evidences column was accepted")
