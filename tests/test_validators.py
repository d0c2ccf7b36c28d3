"""The Great Expectations gate run in a child process (as the ingest stage runs it)."""

import pandas as pd
import pytest

from validators import BackgroundGate, GateFailed

EXPECTATIONS = "validators.ingest:ingest_expectations"


def _frames(question_ids: list[str]) -> dict[str, pd.DataFrame]:
    n = len(question_ids)
    questions = pd.DataFrame({
        "question_id": question_ids, "question": ["q?"] * n, "dataset": ["hotpotqa"] * n, "split": ["train"] * n,
        "route": ["chain"] * n, "hops": [2] * n, "n_answers": [1] * n, "answer_nonempty": [True] * n,
        "n_passages": [2] * n, "n_supporting": [2] * n, "supporting_resolved": [True] * n,
        "sent_idx_in_range": [True] * n, "passages_known": [True] * n,
    })
    passages = pd.DataFrame({"pid": ["hotpotqa:1", "hotpotqa:2"], "dataset": ["hotpotqa"] * 2, "text_len": [10, 12], "n_sentences": [1, 2]})
    return {"questions": questions, "passages": passages}


def test_background_gate_passes_and_writes_data_docs(tmp_path):
    with BackgroundGate() as gate:
        gate.submit("ingest", EXPECTATIONS, _frames(["a", "b"]), docs_dir=tmp_path)
        result = gate.result()
    assert result.success and result.evaluated == 17
    assert (tmp_path / "ingest" / "index.html").exists()


def test_background_gate_failure_names_the_column():
    with BackgroundGate() as gate, pytest.raises(GateFailed, match=r"1 of 17 expectations failed:\n  - questions\.question_id: expect_column_values_to_be_unique failed \(2 unexpected"):
        gate.submit("ingest", EXPECTATIONS, _frames(["a", "a", "b"]), docs_dir=None)
        gate.result()
