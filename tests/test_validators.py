"""The Great Expectations gate run in a child process (as the ingest stage runs it)."""

import pandas as pd
import pytest

from validators import BackgroundGate, GateFailed

EXPECTATIONS = "validators.ingest:ingest_expectations"


def _frames(question_ids: list[str]) -> dict[str, pd.DataFrame]:
    n = len(question_ids)
    questions = pd.DataFrame(
        {
            "question_id": question_ids,
            "question": ["q?"] * n,
            "dataset": ["hotpotqa"] * n,
            "dataset_known": [True] * n,
            "split": ["train"] * n,
            "official_split": ["train"] * n,
            "split_follows_official": [True] * n,
            "route": ["chain"] * n,
            "hops": [2] * n,
            "n_answers": [1] * n,
            "answer_nonempty": [True] * n,
            "n_passages": [2] * n,
            "n_supporting": [2] * n,
            "supporting_resolved": [True] * n,
            "sent_idx_in_range": [True] * n,
            "passages_known": [True] * n,
            "train_text_of_heldout_question": [False] * n,
        }
    )
    passages = pd.DataFrame(
        {
            "pid": ["hotpotqa:1", "hotpotqa:2"],
            "dataset": ["hotpotqa"] * 2,
            "dataset_known": [True] * 2,
            "text_len": [10, 12],
            "n_sentences": [1, 2],
        }
    )
    return {"questions": questions, "passages": passages}


def test_background_gate_passes_and_writes_data_docs(tmp_path):
    with BackgroundGate() as gate:
        gate.submit("ingest", EXPECTATIONS, _frames(["a", "b"]), docs_dir=tmp_path)
        result = gate.result()
    assert result.success and result.evaluated == 20
    assert (tmp_path / "ingest" / "index.html").exists()


def test_background_gate_failure_names_the_column():
    with (
        BackgroundGate() as gate,
        pytest.raises(
            GateFailed,
            match=r"1 of 20 expectations failed:\n  - questions\.question_id: "
            r"expect_column_values_to_be_unique failed \(2 unexpected",
        ),
    ):
        gate.submit("ingest", EXPECTATIONS, _frames(["a", "a", "b"]), docs_dir=None)
        gate.result()


def test_background_gate_that_cannot_run_is_a_clear_error():
    from factory.utils.errors import FactoryError

    with (
        BackgroundGate() as gate,
        pytest.raises(
            FactoryError, match=r"ingest: the Great Expectations gate failed to run: ModuleNotFoundError"
        ),
    ):
        gate.submit("ingest", "validators.no_such_suite:expectations", _frames(["a"]), docs_dir=None)
        gate.result()


def test_ingest_frames_flag_broken_cross_references():
    import pyarrow as pa

    from factory.corpora.pool import PassagePool
    from schemas import PASSAGE
    from validators.ingest import ingest_frames

    pool = PassagePool()
    known, unknown = pool.pairs("hotpotqa", [("T", ["s0", "s1"]), ("T", ["other"])])
    pid, missing_pid = pool.pids[known], pool.pids[unknown]
    passages = pa.Table.from_pylist(
        [{"pid": pid, "dataset": "hotpotqa", "title": "T", "text": "s0 s1", "sentences": ["s0", "s1"]}],
        schema=PASSAGE,
    )

    def question(qid, supporting, entry=known):
        return {
            "question_id": qid,
            "dataset": "hotpotqa",
            "split": "train",
            "official_split": "train",
            "route": "chain",
            "question": "q?",
            "question_norm": "q",
            "hops": 2,
            "answers": ["a"],
            "passages": [entry],
            "supporting": supporting,
            "source_file": "h.json",
        }

    rows = [
        question("ok", [{"title": "T", "sent_idx": 1, "pid": pid}]),
        question("index out of range", [{"title": "T", "sent_idx": 2, "pid": pid}]),
        question("title not in pool", [{"title": "U", "sent_idx": 0, "pid": pid}]),
        question("pid not in pool", [{"title": "T", "sent_idx": 0, "pid": missing_pid}]),
        question("pid not in passages", [{"title": "T", "sent_idx": -1, "pid": missing_pid}], entry=unknown),
    ]
    frame = pd.DataFrame(ingest_frames(rows, pool, passages)["questions"]).set_index("question_id")
    assert frame["supporting_resolved"].to_dict() == {
        "ok": True,
        "index out of range": True,
        "title not in pool": False,
        "pid not in pool": False,
        "pid not in passages": True,
    }
    assert frame["sent_idx_in_range"].to_dict() == {
        "ok": True,
        "index out of range": False,
        "title not in pool": True,
        "pid not in pool": False,
        "pid not in passages": True,
    }
    assert frame["passages_known"].to_dict() == {
        "ok": True,
        "index out of range": True,
        "title not in pool": True,
        "pid not in pool": True,
        "pid not in passages": False,
    }
    assert frame["n_passages"].tolist() == [1] * 5 and frame["n_supporting"].tolist() == [1] * 5
    assert frame["dataset_known"].tolist() == [True] * 5
    rows[0]["dataset"] = "nowhereqa"  # a dataset factory.corpora's registry lacks
    frame = pd.DataFrame(ingest_frames(rows, pool, passages)["questions"]).set_index("question_id")
    assert frame["dataset_known"].tolist() == [False] + [True] * 4


def test_ingest_gate_catches_a_dataset_the_registry_lacks():
    frames = _frames(["a", "b"])
    frames["passages"]["dataset_known"] = [True, False]
    with (
        BackgroundGate() as gate,
        pytest.raises(GateFailed, match=r"passages\.dataset_known: expect_column_values_to_be_in_set"),
    ):
        gate.submit("ingest", EXPECTATIONS, frames, docs_dir=None)
        gate.result()


def test_ingest_gate_catches_a_train_question_with_a_held_out_questions_text():
    from validators.leakage import train_text_of_heldout_question

    questions = [
        {"question_id": "a", "split": "train", "question_norm": "who wrote it"},
        {"question_id": "b", "split": "heldout", "question_norm": "who wrote it"},
        {"question_id": "c", "split": "train", "question_norm": "where is it"},
        {"question_id": "d", "split": "test", "question_norm": "where is it"},  # decontamination's to remove
    ]
    assert train_text_of_heldout_question(questions) == [True, False, False, False]
    frames = _frames(["a", "b", "c"])
    frames["questions"]["train_text_of_heldout_question"] = [True, False, False]
    with (
        BackgroundGate() as gate,
        pytest.raises(
            GateFailed, match=r"questions\.train_text_of_heldout_question: expect_column_values_to_be_in_set"
        ),
    ):
        gate.submit("ingest", EXPECTATIONS, frames, docs_dir=None)
        gate.result()


def test_ingest_gate_catches_an_official_dev_question_outside_the_test_split():
    from validators.leakage import split_follows_official

    questions = [
        {"split": "train", "official_split": "train"},
        {"split": "heldout", "official_split": "train"},
        {"split": "test", "official_split": "dev"},
        {"split": "train", "official_split": "dev"},
        {"split": "test", "official_split": "train"},
    ]
    assert split_follows_official(questions) == [True, True, True, False, False]
    frames = _frames(["a", "b"])
    frames["questions"]["split_follows_official"] = [True, False]
    with (
        BackgroundGate() as gate,
        pytest.raises(
            GateFailed, match=r"questions\.split_follows_official: expect_column_values_to_be_in_set"
        ),
    ):
        gate.submit("ingest", EXPECTATIONS, frames, docs_dir=None)
        gate.result()


def test_a_gate_over_empty_frames_passes_without_importing_great_expectations():
    """The variants gate of a round with no set (the demo's every round) builds its expectations only
    when a frame has rows: importing GX costs seconds in every such stage."""
    import subprocess
    import sys

    check = (
        "import sys, pandas as pd; from validators import run_suites;"
        "from validators.supervision import supervision_suites;"
        "gate = run_suites('v', supervision_suites(pd.DataFrame(), pd.DataFrame()), docs_dir=None);"
        "assert gate.success and gate.evaluated == 0;"
        "print('great_expectations' in sys.modules)"
    )
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "False"


def test_expectations_built_by_a_function_still_gate_the_rows(tmp_path):
    from validators import run_suites
    from validators.supervision import supervision_suites

    examples = pd.DataFrame(
        {
            "example_id": ["a", "a"],  # not unique: the gate must fail
            "question_split": ["train", "train"],
            "text_of_eval_question": [False, False],
            "ends_with_assistant": [True, True],
            "units_consistent": [True, True],
        }
    )
    with pytest.raises(GateFailed, match="example_id"):
        run_suites("v", supervision_suites(examples, pd.DataFrame()), docs_dir=None)
