"""A round's labels (factory/backtrace/round.py): ``label_round`` on a tiny trajectory file, its sorted
table and counts, the same table however the file is cut into tasks, the tokenizer it counts with, and
the stage's metrics built from it."""

from __future__ import annotations

import logging

import pytest

from factory.backtrace.labels import backtrace
from factory.backtrace.round import label_round
from factory.params.config import Params
from factory.params.label_sections import BacktraceParams
from factory.simulate.assemble import build_trajectory
from schemas import LABELS, write_parquet
from tests.backtrace.cases import cycle_trajectory, t

MODES = ["undirected_shortest", "directed_reach"]
TARGETS = ["thought_and_answer", "answer_only"]
PARAMS = Params(backtrace={"modes": MODES, "target_modes": TARGETS})


def wrong_trajectory() -> dict:
    """One iteration, an answer that is not the gold one: labelled, counted as not correct."""
    question = {
        "question_id": "test/q2",
        "question": "Who directed Film Y?",
        "answers": ["Jane Doe"],
        "dataset": "2wikimultihopqa",
        "route": "chain",
        "qtype": "compositional",
        "split": "train",
    }
    iterations = [[("Film Y", "director", [("Film Y", "director", "John Roe")])]]
    return build_trajectory(
        question, iterations, "Film Y was directed by John Roe.", "John Roe", trajectory_id="t0", dedupe=False
    )


@pytest.fixture
def round_file(tmp_path, monkeypatch):
    """The round's trajectories (file order t1, t0) in a project without a policy model or an index."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "round_0.parquet"
    write_parquet([cycle_trajectory(), wrong_trajectory()], path, "trajectory")
    return path


def by_key(labelled) -> dict:
    return {(r["trajectory_id"], r["mode"], r["target_mode"]): r for r in labelled.table.to_pylist()}


def test_every_trajectory_is_labelled_under_every_mode_in_sorted_order(round_file):
    labelled = label_round(PARAMS, round_file, 2)
    assert labelled.table.schema.equals(LABELS)
    keys = [(r["trajectory_id"], r["mode"], r["target_mode"]) for r in labelled.table.to_pylist()]
    assert keys == sorted((tid, m, tm) for tid in ("t0", "t1") for m in MODES for tm in TARGETS)
    assert (labelled.trajectories, labelled.correct) == (2, 1)
    assert len(labelled.frame) == labelled.table.num_rows == 8
    rows = by_key(labelled)
    # the same S_q as labelling the trajectory alone (tests/backtrace/test_labels.py, the cycle)
    assert rows[("t1", "undirected_shortest", "thought_and_answer")]["kept_triplet_ids"] == t(0, 2)
    assert rows[("t1", "directed_reach", "thought_and_answer")]["kept_triplet_ids"] == t(0, 2, 3)
    alone = backtrace(cycle_trajectory(), BacktraceParams(mode="directed_reach", target_mode="answer_only"))
    assert rows[("t1", "directed_reach", "answer_only")] == alone
    assert [r["correct"] for k, r in rows.items() if k[0] == "t0"] == [False] * 4


def test_without_a_policy_model_or_index_it_counts_words_and_says_why(round_file, caplog):
    caplog.set_level(logging.WARNING, logger="factory.backtrace.round")
    labelled = label_round(PARAMS, round_file, 2)
    assert labelled.tokenizer == "whitespace" and "models/base" in labelled.tokenizer_fallback_reason
    assert set(labelled.table.column("tokenizer").to_pylist()) == {"whitespace"}
    assert "no passage store" in labelled.answer_passage_off_reason
    warnings = [r.getMessage() for r in caplog.records]
    assert any("no policy tokenizer" in w for w in warnings)
    assert any("answer-passage rule off" in w for w in warnings)


def test_a_policy_tokenizer_folder_is_what_counts_the_tokens(round_file, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    # every word and every punctuation run is a token: more tokens than whitespace words
    tok = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    folder = tmp_path / "policy"
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    words = label_round(PARAMS, round_file, 2)
    hf = label_round(Params(llm={"model": str(folder)}, backtrace=PARAMS.backtrace), round_file, 2)
    assert hf.tokenizer == f"hf:{folder}" and hf.tokenizer_fallback_reason is None
    assert set(hf.table.column("tokenizer").to_pylist()) == {f"hf:{folder}"}
    key = ("t1", "undirected_shortest", "thought_and_answer")
    assert by_key(hf)[key]["total_tokens"] > by_key(words)[key]["total_tokens"] > 0
    assert by_key(hf)[key]["kept_triplet_ids"] == by_key(words)[key]["kept_triplet_ids"]


def test_the_table_and_counts_do_not_depend_on_how_the_file_is_cut_into_tasks(round_file, monkeypatch):
    from factory.backtrace import tasks

    whole = label_round(PARAMS, round_file, 2)
    assert len(tasks.plan_tasks(round_file)) == 1
    monkeypatch.setattr(tasks, "TASK_ROWS", 1)
    assert tasks.plan_tasks(round_file) == [(0, 0, 1), (0, 1, 2)]
    sliced = label_round(PARAMS, round_file, 2)
    assert sliced.table.equals(whole.table)
    assert (sliced.trajectories, sliced.correct) == (whole.trajectories, whole.correct)
    assert sliced.summary.result() == whole.summary.result()


def test_metrics_report_what_was_labelled(round_file):
    labelled = label_round(PARAMS, round_file, 2)
    m = labelled.metrics(PARAMS, total=2, expectations_passed=11)
    assert (m["status"], m["trajectories"], m["correct"], m["labels"], m["expectations_passed"]) == (
        "ok",
        2,
        1,
        8,
        11,
    )
    assert m["default"] == "undirected_shortest/thought_and_answer" and m["embedding_model"] is None
    assert (
        m["tokenizer"] == "whitespace"
        and m["tokenizer_fallback_reason"] == labelled.tokenizer_fallback_reason
    )
    assert m["answer_passage"] is False and "no passage store" in m["answer_passage_off_reason"]
    assert set(m["by_mode"]) == {f"{mo}/{tm}" for mo in MODES for tm in TARGETS}
    default = m["by_mode"][m["default"]]
    assert (default["all"]["trajectories"], default["all"]["correct"]) == (2, 1)
    fa = by_key(labelled)[("t1", "undirected_shortest", "thought_and_answer")]["fa_ratio"]
    assert default["all"]["mean_fa_ratio_correct"] == pytest.approx(fa)
    assert set(default["by_dataset"]) == {"hotpotqa", "2wikimultihopqa"}
