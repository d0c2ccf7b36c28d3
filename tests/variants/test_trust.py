"""A published set others can trust: `publish` stops before writing when a question of an evaluation set
would be published; each card states its questions' official split, the evaluation sets with their
sha256, rules and counts, and the run's settings fingerprint; `factory compare-sets` refuses to compare
sets made with another model, retriever, corpora or evaluation sets."""

from __future__ import annotations

import json

import pytest

from factory.cli import main
from factory.params.config import Params
from factory.utils import paths
from factory.utils.io import read_json, write_json
from factory.variants.fingerprint import compare, settings_fingerprint
from tests.stages.test_s10_train import example, write_set
from tests.variants.publishable import make_publishable

V = "backtrace"
ARGS = ["publish", "--set", f"bootstrap.variants=[{V}]", "--set", "bootstrap.seeds=[0]"]
EVAL_SET = "hotpotqa/dev.json"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A round-0 set of three examples (hotpotqa/q0..q2), selected, as a run leaves it."""
    monkeypatch.chdir(tmp_path)
    write_set(V, 0, [example(V, 0, i, "base") for i in range(3)])
    write_json(paths.supervision_dir(V, 0) / "stats.json", {"status": "built"})
    write_json(paths.METRICS / "summary.json", {"variants": {V: {"selected": {"0": {"round": 0}}}}})
    return tmp_path


def _eval_row(question_norm: str, eval_id: str = "dev-7") -> dict:
    return {
        "eval_set": EVAL_SET,
        "dataset": "hotpotqa",
        "eval_id": eval_id,
        "question": question_norm + "?",
        "question_norm": question_norm,
        "answers": ["a"],
        "titles": ["T"],
    }


def test_a_clean_set_is_published_with_its_provenance(project):
    make_publishable(eval_questions=[_eval_row("who wrote something else entirely")])
    assert main(ARGS) == 0
    folder = paths.PUBLISHED / V
    card = (folder / "README.md").read_text()
    assert "Every example's question comes from an **official train file**" in card
    assert "| `corpora/hotpotqa/train.json` | hotpotqa | train | 3 |" in card
    assert "## Checked against these evaluation sets" in card and "## Settings fingerprint" in card
    fingerprint = json.loads((folder / "fingerprint.json").read_text())
    assert f"`{fingerprint['id']}`" in card and fingerprint["code"]["source_sha256"] in card
    assert fingerprint["retriever"] == {"retriever": "bm25", "scope": "question", "top_n": 3}
    assert fingerprint["corpora"][0]["official_split"] == "train"


@pytest.mark.parametrize(
    ("poison", "why"),
    [
        ("flagged", "hotpotqa/q1: flagged by decontamination"),
        ("same text", "hotpotqa/q1: the text of hotpotqa/dev.json question dev-7"),
        ("dev question", "hotpotqa/q1: official split dev, split test"),
        ("held out", "hotpotqa/q1: official split train, split heldout"),
    ],
)
def test_a_question_of_an_evaluation_set_stops_publish_before_it_writes(project, capsys, poison, why):
    flagged = [{"question_id": "hotpotqa/q1", "rule": "near_duplicate"}] if poison == "flagged" else None
    evals = [_eval_row("which river flows through city 1")] if poison == "same text" else None
    make_publishable(eval_questions=evals, flagged=flagged)
    if poison in ("dev question", "held out"):
        from schemas import read_rows, write_parquet

        rows = read_rows(paths.QUESTIONS)
        for q in rows:
            if q["question_id"] == "hotpotqa/q1":
                q["official_split"], q["split"] = (
                    ("dev", "test") if poison == "dev question" else ("train", "heldout")
                )
        write_parquet(rows, paths.QUESTIONS, "question")
    assert main(ARGS) == 1
    err = capsys.readouterr().err
    assert "publish refused: 1 example(s) of the sets would publish a question of an evaluation set" in err
    assert why in err and "Nothing was written" in err
    assert not (paths.PUBLISHED / V).exists() and not (paths.METRICS / "published.json").exists()


def _fingerprint(**sets) -> dict:
    params = Params.model_validate(sets)
    ingest = {
        "sources": {
            "/d/hotpot_train_v1.1.json": {"dataset": "hotpotqa", "official_split": "train", "sha256": "a"}
        }
    }
    decontamination = {"eval_sets": [{"file": "/d/dev.json", "dataset": "hotpotqa", "sha256": "b"}]}
    return settings_fingerprint(params, "openai:llama (base: /m)", ingest, decontamination)


def test_the_fingerprint_is_the_settings_and_says_what_may_be_compared():
    a = _fingerprint()
    assert a == _fingerprint()  # the same settings, the same fingerprint (and id)
    assert compare(a, _fingerprint(trajectories={"n_questions": 7})) == (True, ["params_sha256"])
    other_retriever = _fingerprint(retrieval={"top_n": 5})
    assert other_retriever["id"] != a["id"]
    comparable, differs = compare(a, other_retriever)
    assert not comparable and differs == ["retriever", "params_sha256"]
    assert set(a) >= {"code", "params_sha256", "served_model", "retriever", "corpora", "eval_sets", "seeds"}
    assert a["seeds"]["splits"] == 13 and a["seeds"]["bootstrap"] == [0]


def test_compare_sets_names_what_differs(tmp_path, capsys):
    for name, fp in (
        ("a", _fingerprint()),
        ("b", _fingerprint(train={"seed": 3})),
        ("c", _fingerprint(index={"retriever": "dense"})),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "fingerprint.json").write_text(json.dumps(fp))
    assert main(["compare-sets", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "comparable (differ in params_sha256, seeds)" in capsys.readouterr().out
    assert main(["compare-sets", str(tmp_path / "a"), str(tmp_path / "c")]) == 1
    err = capsys.readouterr().err
    assert "cannot be compared: their settings differ in retriever, params_sha256" in err
    assert main(["compare-sets", str(tmp_path / "a"), str(tmp_path)]) == 1
    assert "is not a published set folder" in capsys.readouterr().err


def test_published_metrics_name_the_evaluation_sets(project):
    make_publishable()
    metrics = read_json(paths.METRICS / "decontamination.json")
    metrics["eval_sets"] = [
        {
            "eval_set": EVAL_SET,
            "dataset": "hotpotqa",
            "file": "/d/dev.json",
            "origin": "corpora",
            "sha256": "c" * 64,
            "questions": 7405,
            "text_only": 0,
            "unreadable": 0,
        }
    ]
    metrics["datasets"] = {
        "hotpotqa": {"checked": 10, "clean": 8, "contaminated": 2, "by_rule": {"exact": 1, "same_chain": 1}}
    }
    write_json(paths.METRICS / "decontamination.json", metrics)
    assert main(ARGS) == 0
    card = (paths.PUBLISHED / V / "README.md").read_text()
    assert f"| {EVAL_SET} | `/d/dev.json` | 7405 | 0 | 0 | `{'c' * 64}` |" in card
    assert "| hotpotqa | 10 | 8 | 2 | exact 1, same_chain 1 |" in card
