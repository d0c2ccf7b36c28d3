"""`factory decontaminate`: every training-pool question checked against every evaluation set, the run's
own dev files and `decontamination.eval_sets`; the flagged ones written with the evaluation question they
match, the counts adding up per dataset, evaluation set and rule."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from factory.cli import main
from factory.corpora.ingest import ingest_sources
from factory.utils import paths
from schemas import read_rows, write_parquet
from tests.corpora.test_corpora import params_for

FIELDS = {"question_id", "source_id", "dataset", "eval_set", "eval_id", "rule", "score"}


def _records(path: Path, n: int) -> list[dict]:
    return json.loads(path.read_text())[:n]


def _contaminated_train_file(tmp_path: Path, dev: list[dict]) -> Path:
    """A 'train' file: three copies of dev questions (the same text; a typo; the same chain asked
    otherwise, of a compositional question: a comparison's answer is one of its options, which other
    questions over the same two pages share) and three questions of its own."""
    same, typo, chain = (copy.deepcopy(dev[i]) for i in (0, 1, 3))
    same["_id"], same["question"] = "copy-same", same["question"].upper()
    typo["_id"], typo["question"] = (
        "copy-typo",
        typo["question"].replace("the ", "teh ", 1).rstrip("?") + " ?",
    )
    chain["_id"] = "copy-chain"
    titles = sorted({t for t, _ in chain["supporting_facts"]})
    chain["question"] = f"Following {titles[0]} and {titles[-1]}, which answer do they lead to?"
    own = copy.deepcopy(dev[10:13])
    for i, r in enumerate(own):
        r["_id"], r["question"] = (
            f"own-{i}",
            f"In a question never asked before, number {i}, what is {r['answer']}?",
        )
        r["answer"] = f"nothing {i}"
    path = tmp_path / "train_copies.json"
    path.write_text(json.dumps([same, typo, chain, *own]))
    return path


@pytest.fixture
def project(tmp_path, monkeypatch, corpora):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _ingest(corpus_files: dict) -> list[dict]:
    questions = ingest_sources(params_for(corpus_files, official="train")).questions
    write_parquet(questions, paths.QUESTIONS, "question")
    return questions


def test_copies_of_the_runs_own_dev_questions_are_flagged_and_the_counts_add_up(project, corpora):
    dev = corpora / "2wikimultihopqa" / "dev_sample.json"
    train = _contaminated_train_file(project, _records(dev, 40))
    _ingest({"2wikimultihopqa": [dev, train]})
    corpus = f"corpora={{2wikimultihopqa: [{dev}, {train}]}}"
    assert main(["decontaminate", "--set", corpus, "--set", "splits.heldout=0.0"]) == 0
    flagged = [json.loads(line) for line in paths.CONTAMINATION.read_text().splitlines()]
    by_id = {f["source_id"]: f for f in flagged}
    assert set(by_id) == {"copy-same", "copy-typo", "copy-chain"}  # the three own questions are clean
    assert all(set(f) == FIELDS for f in flagged)
    assert by_id["copy-same"]["rule"] == "exact" and by_id["copy-same"]["score"] == 1.0
    assert by_id["copy-typo"]["rule"] == "near_duplicate"
    assert by_id["copy-chain"]["rule"] == "same_chain"
    source = _records(dev, 4)
    assert [by_id[k]["eval_id"] for k in ("copy-same", "copy-typo", "copy-chain")] == [
        source[i]["_id"] for i in (0, 1, 3)
    ]
    assert {f["eval_set"] for f in flagged} == {"2wikimultihopqa/dev_sample.json"}
    metrics = json.loads((paths.METRICS / "decontamination.json").read_text())
    d = metrics["datasets"]["2wikimultihopqa"]
    assert (d["checked"], d["clean"], d["contaminated"]) == (6, 3, 3)
    assert d["by_rule"] == {"exact": 1, "near_duplicate": 1, "same_chain": 1}
    assert d["by_eval_set"]["2wikimultihopqa/dev_sample.json"] == d["by_rule"]
    [eval_set] = metrics["eval_sets"]
    assert eval_set["questions"] == 526 and eval_set["origin"] == "corpora" and len(eval_set["sha256"]) == 64
    assert len(read_rows(paths.EVAL_QUESTIONS)) == 526


def test_an_evaluation_set_the_run_does_not_train_on_is_protected_too(project, corpora):
    """Training on a file made of 2Wiki dev questions with no 2Wiki dev file in the corpora: the
    evaluation set given in decontamination.eval_sets catches them."""
    dev = corpora / "2wikimultihopqa" / "dev_sample.json"
    train = _contaminated_train_file(project, _records(dev, 40))
    _ingest({"2wikimultihopqa": [train]})
    sets = ["--set", f"corpora={{2wikimultihopqa: [{train}]}}", "--set", "splits.heldout=0.0"]
    assert main(["decontaminate", *sets]) == 0
    assert paths.CONTAMINATION.read_text() == ""  # no evaluation set: nothing to match
    extra = f"decontamination.eval_sets={{2wikimultihopqa: [{dev}]}}"
    assert main(["decontaminate", *sets, "--set", extra]) == 0
    flagged = [json.loads(line) for line in paths.CONTAMINATION.read_text().splitlines()]
    assert {f["source_id"] for f in flagged} == {"copy-same", "copy-typo", "copy-chain"}
    [eval_set] = json.loads((paths.METRICS / "decontamination.json").read_text())["eval_sets"]
    assert eval_set["origin"] == "decontamination.eval_sets" and eval_set["file"] == str(dev)


def test_rules_are_switched_by_the_params(project, corpora):
    dev = corpora / "2wikimultihopqa" / "dev_sample.json"
    train = _contaminated_train_file(project, _records(dev, 40))
    _ingest({"2wikimultihopqa": [dev, train]})
    corpus = f"corpora={{2wikimultihopqa: [{dev}, {train}]}}"
    assert main(["decontaminate", "--set", corpus, "--set", "decontamination.rules=[exact]"]) == 0
    flagged = [json.loads(line) for line in paths.CONTAMINATION.read_text().splitlines()]
    assert [(f["source_id"], f["rule"]) for f in flagged] == [("copy-same", "exact")]


def test_an_evaluation_set_that_is_a_training_file_or_missing_is_refused(project, corpora, capsys):
    train = corpora / "hotpotqa" / "train_sample.json"
    _ingest({"hotpotqa": [train]})
    corpus = f"corpora={{hotpotqa: [{train}]}}"
    assert (
        main(
            ["decontaminate", "--set", corpus, "--set", f"decontamination.eval_sets={{hotpotqa: [{train}]}}"]
        )
        == 1
    )
    assert "an evaluation set cannot be a training file" in capsys.readouterr().err
    missing = project / "nowhere" / "dev.json"
    assert (
        main(
            [
                "decontaminate",
                "--set",
                corpus,
                "--set",
                f"decontamination.eval_sets={{hotpotqa: [{missing}]}}",
            ]
        )
        == 1
    )
    assert f"corpus file {missing} does not exist" in capsys.readouterr().err
    assert not paths.CONTAMINATION.exists()  # nothing written by a refused run
