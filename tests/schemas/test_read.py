"""Reading only what a stage needs: columns (nested fields too), rows by value, a row group at a time."""

from __future__ import annotations

import pytest

from schemas import (
    TRAJECTORY,
    columns_except,
    iter_batches,
    num_rows,
    read_rows,
    read_table,
    write_parquet,
)
from tests.schemas.test_validate import label_row


def _write(tmp_path, n=9000):
    rows = [label_row(trajectory_id=f"t{i}", mode="a" if i % 2 else "b") for i in range(n)]
    path = tmp_path / "labels.parquet"
    write_parquet(rows, path, "labels")
    return path, rows


def test_where_keeps_matching_rows_in_file_order(tmp_path):
    path, rows = _write(tmp_path)
    wanted = ["t8999", "t3", "t4100", "nope"]
    got = read_rows(path, ["trajectory_id", "fa_ratio"], where={"trajectory_id": wanted})
    assert got == [{"trajectory_id": t, "fa_ratio": 0.3} for t in ("t3", "t4100", "t8999")]
    both = read_rows(path, ["trajectory_id"], where={"trajectory_id": wanted, "mode": ["a"]})
    assert both == [{"trajectory_id": "t3"}, {"trajectory_id": "t8999"}]
    assert read_rows(path, where={"trajectory_id": []}) == []
    assert read_table(path, ["trajectory_id"], where={"trajectory_id": []}).num_rows == 0
    assert read_rows(path, where={"trajectory_id": ["t5"]}) == [rows[5]]


def test_batches_are_row_groups_and_counts_come_from_the_footer(tmp_path):
    path, _ = _write(tmp_path)
    assert [b.num_rows for b in iter_batches(path, ["trajectory_id"])] == [4096, 4096, 808]
    assert num_rows(path) == 9000


def test_nested_columns_read_one_field_of_a_struct(tmp_path):
    steps = [
        {
            "index": 0,
            "kind": "final",
            "messages": [{"role": "user", "content": "x" * 1000}],
            "output": "Answer: a",
            "status": "ok",
            "pairs": [],
            "retrieved": ["p"],
            "triplet_ids": [],
            "attempts": 1,
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "latency_s": 0.1,
        }
    ]
    base = {name: None for name in TRAJECTORY.names}
    row = {
        **base,
        "trajectory_id": "t",
        "question_id": "q",
        "dataset": "hotpotqa",
        "split": "train",
        "qtype": "bridge",
        "route": "chain",
        "policy": "base",
        "round": 0,
        "sample": 0,
        "seed": 1,
        "question": "q?",
        "answers": ["a"],
        "prompt_version": "knowtrace-v1",
        "model": "m",
        "status": "ok",
        "em": 1.0,
        "f1": 1.0,
        "correct": True,
        "rationalized": False,
        "steps": steps,
        "triplets": [],
    }
    path = tmp_path / "t.parquet"
    write_parquet([row], path, "trajectory")
    (light,) = read_rows(path, ["trajectory_id", "steps.list.element.kind"])
    assert light == {"trajectory_id": "t", "steps": [{"kind": "final"}]}
    (without,) = read_rows(path, columns_except(TRAJECTORY, "steps", ["messages"]))
    assert "messages" not in without["steps"][0] and without["steps"][0]["output"] == "Answer: a"
    assert set(without) == set(TRAJECTORY.names)


def test_an_artifact_is_checked_against_its_contract_on_open(tmp_path, monkeypatch):
    import pandas as pd

    from factory.utils.errors import FactoryError
    from schemas import PASSAGE, open_parquet, write_parquet

    monkeypatch.chdir(tmp_path)
    path = tmp_path / "data" / "interim" / "passages.parquet"
    rows = [
        {"pid": f"p{i}", "dataset": "hotpotqa", "title": "T", "text": "x", "sentences": ["x"]}
        for i in range(3)
    ]
    write_parquet(rows, path, "passage")
    assert open_parquet(path).schema_arrow.equals(PASSAGE)
    pd.read_parquet(path).to_parquet(path)  # a round trip through pandas: nullable, same values
    assert read_rows(path) == rows
    frame = pd.read_parquet(path)
    frame["extra"] = 1
    frame.to_parquet(path)
    with pytest.raises(
        FactoryError, match=r"column 'extra' is not in the contract.*`factory ingest` rewrites it"
    ):
        read_rows(path, ["pid"])
    path.write_bytes(b"PAR1 cut short")
    with pytest.raises(FactoryError, match=r"passages.parquet is damaged \(not a readable parquet file"):
        num_rows(path)
    path.unlink()
    with pytest.raises(FactoryError, match=r"passages.parquet is missing: `factory ingest` rewrites it"):
        read_table(path)
    other = tmp_path / "mine.parquet"  # not an artifact of the pipeline: read as it is
    pd.DataFrame({"a": [1]}).to_parquet(other)
    assert read_rows(other) == [{"a": 1}]
