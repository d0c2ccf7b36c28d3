"""A fourth corpus is one module and one registry entry: Toy Trails (``tests/corpora/toy_corpus.py``, a
record shape, licence and source of its own) registered with one ``CORPORA`` entry is ingested, indexed
and published by the real stages, in this process, with nothing else changed; a dataset the registry
lacks, or a licence the Hub does not know, is an error that says what to do."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from factory import corpora
from factory.cli import main
from factory.utils import paths
from factory.utils.io import write_json
from schemas import read_rows
from tests.corpora import toy_corpus
from tests.stages.test_s10_train import example, write_set
from tests.variants.publishable import make_publishable

LAKES = ["Arno", "Bessel", "Corra", "Dunmere", "Elsk", "Fallow", "Garrow", "Hollin", "Ister", "Jarn"]
RIVERS = ["Vell", "Wend", "Yarl", "Zorn", "Quill", "Rusk", "Skerry", "Tolt", "Umber", "Oxley"]
TOWNS = ["Benton", "Carrick", "Dalby", "Esher", "Firth", "Glenn", "Harlow", "Irby", "Jessop", "Kelso"]


def trail(i: int) -> dict:
    lake, river, town = LAKES[i], RIVERS[i], TOWNS[i]
    return {
        "trail_id": f"trail-{i}",
        "kind": "relay" if i % 2 else "fork",
        "ask": f"Which town does the river that starts at Lake {lake} reach?",
        "reply": town,
        "stops": [
            {"place": f"Lake {lake}", "notes": f"Lake {lake} is a mountain lake. The {river} starts there."},
            {"place": f"{river} (river)", "notes": f"The {river} is a river. It reaches the town of {town}."},
            {"place": f"{town} Hall", "notes": f"{town} Hall is a building in {town}. It opened in 19{i}0."},
        ],
        "path": [0, 1],
    }


@pytest.fixture
def toy_project(tmp_path, monkeypatch):
    """A project folder with a Toy Trails file (10 good records, one that points past its stops, one
    duplicate id) and the corpus registered: the one line a new corpus adds."""
    monkeypatch.setitem(corpora.CORPORA, toy_corpus.DATASET, "tests.corpora.toy_corpus")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FACTORY_NO_PROGRESS", "1")
    bad = {**trail(0), "trail_id": "trail-bad", "path": [0, 7]}
    records = [trail(i) for i in range(10)] + [bad, {**trail(3), "ask": "Another question?"}]
    source = tmp_path / "toy" / "trails.jsonl"
    source.parent.mkdir()
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    corpus = f"corpora={{{toy_corpus.DATASET}: [{source}]}}"
    return ["--set", corpus, "--set", f"splits.official={{{source}: train}}"]  # its name tells no split


def test_a_registered_fourth_corpus_is_ingested_indexed_and_published(toy_project):
    corpus_set = toy_project
    assert main(["ingest", *corpus_set]) == 0
    questions = read_rows(paths.QUESTIONS)
    assert len(questions) == 10 and {q["dataset"] for q in questions} == {"toytrails"}
    q = next(q for q in questions if q["source_id"] == "trail-1")
    assert q["qtype"] == "relay" and q["answers"] == ["Carrick"] and q["hops"] == 2
    supporting = [(s["title"], s["sent_idx"]) for s in q["supporting"]]
    assert supporting == [("Lake Bessel", -1), ("Wend (river)", -1)]  # whole stops
    quarantine = [json.loads(line) for line in paths.QUARANTINE.read_text().splitlines()]
    assert {(b["id"], b["field"]) for b in quarantine} == {("trail-bad", "path[1]"), ("trail-3", "trail_id")}
    metrics = json.loads((paths.METRICS / "ingest.json").read_text())["datasets"]["toytrails"]
    assert (metrics["read"], metrics["ingested"], metrics["quarantined"]) == (12, 10, 2)
    assert metrics["by_type"]["fork"]["read"] == 6  # the corpus's own question type (its `kind` field)
    gate = json.loads((paths.METRICS / "ingest.json").read_text())["expectations_passed"]
    assert gate >= 20  # the ingest gate ran, dataset_known and the official splits included

    assert main(["decontaminate", *corpus_set]) == 0  # no evaluation set: every question clean
    assert json.loads((paths.METRICS / "decontamination.json").read_text())["total"]["contaminated"] == 0
    assert main(["index", *corpus_set]) == 0
    assert (paths.INDEX_DIR / "bm25" / "toytrails").is_dir()
    recall = json.loads((paths.METRICS / "retrieval.json").read_text())["recall"]["question"]
    assert set(recall) == {"toytrails", "all"} and recall["toytrails"]["questions"] == 10

    from factory.agent.scripted import gold_hops
    from factory.simulate.facts import gold_facts

    # its gold, read by its kind (supporting paragraphs): the chain to the answer
    facts = [(f.subject, f.object, f.level) for f in gold_facts(q)]
    assert facts == [("Lake Bessel", "Wend", 0), ("Wend", "Carrick", 1)]
    assert gold_hops(q)[-1].object == "Carrick"

    variant = "backtrace"
    rows = [
        {**example(variant, 0, i, "base"), "question_id": q["question_id"], "dataset": q["dataset"]}
        for i, q in enumerate([q for q in questions if q["split"] == "train"][:3])
    ]
    write_set(variant, 0, rows)
    write_json(paths.supervision_dir(variant, 0, 0) / "stats.json", {"status": "built"})
    write_json(paths.METRICS / "summary.json", {"variants": {variant: {"selected": {"0": {"round": 0}}}}})
    seeds = ["--set", "bootstrap.seeds=[0]"]
    assert main(["publish", *corpus_set, "--set", f"bootstrap.variants=[{variant}]", *seeds]) == 0
    card = (paths.PUBLISHED / variant / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    assert header["license"] == ["cc-by-sa-3.0"]
    assert header["source_datasets"] == ["Toy Trails (a test corpus), https://example.org/toy-trails"]
    assert "cc-by-sa-3.0 (Toy Trails is CC BY-SA 3.0: derived data is share-alike)" in card


def test_an_unregistered_dataset_is_refused_by_the_params_naming_the_key_and_the_known_ones(
    toy_project, monkeypatch, capsys
):
    monkeypatch.delitem(corpora.CORPORA, toy_corpus.DATASET)
    assert main(["ingest", *toy_project]) == 1
    err = capsys.readouterr().err
    known = "the corpora are hotpotqa, 2wikimultihopqa, musique"
    assert f"corpora.toytrails: unknown dataset 'toytrails': {known}" in err
    assert "docs/development.md#adding-a-corpus" in err and "Value error" not in err


def _published_set(dataset: str) -> list[str]:
    variant = "backtrace"
    write_set(variant, 0, [{**example(variant, 0, 1, "base"), "dataset": dataset}])
    write_json(paths.supervision_dir(variant, 0, 0) / "stats.json", {"status": "built"})
    write_json(paths.METRICS / "summary.json", {"variants": {variant: {"selected": {"0": {"round": 0}}}}})
    make_publishable()
    return ["publish", "--set", f"bootstrap.variants=[{variant}]", "--set", "bootstrap.seeds=[0]"]


def test_a_licence_the_hub_does_not_know_stops_publishing_naming_the_dataset(
    toy_project, monkeypatch, capsys
):
    made_up = dataclasses.replace(toy_corpus.CORPUS, license="toy-licence-1.0")
    monkeypatch.setattr(toy_corpus, "CORPUS", made_up)
    assert main(_published_set(toy_corpus.DATASET)) == 1
    err = capsys.readouterr().err
    assert "dataset 'toytrails' has licence 'toy-licence-1.0'" in err
    assert "not a Hugging Face Hub licence identifier" in err and "nothing was published" in err
    assert not (paths.PUBLISHED / "backtrace").exists()


def test_an_example_of_a_dataset_the_registry_lacks_stops_publishing(toy_project, capsys):
    assert main(_published_set("nowhereqa")) == 1
    err = capsys.readouterr().err
    assert "unknown dataset 'nowhereqa'" in err and "hotpotqa, 2wikimultihopqa, musique, toytrails" in err
    assert "docs/development.md#adding-a-corpus" in err
    assert not (paths.PUBLISHED / "backtrace").exists()


def test_a_registry_entry_whose_module_defines_another_corpus_is_an_error(monkeypatch):
    from factory.utils.errors import FactoryError

    monkeypatch.setitem(corpora.CORPORA, "trails", "tests.corpora.toy_corpus")
    with pytest.raises(FactoryError, match=r"registered as corpus 'trails'.*a CORPUS named 'toytrails'"):
        corpora.corpus("trails")
