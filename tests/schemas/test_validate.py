import pyarrow as pa
import pytest

from factory.utils.errors import FactoryError
from schemas import (
    LABELS,
    SchemaError,
    read_round_input,
    read_rows,
    to_table,
    validate_table,
    write_parquet,
    write_parquet_batches,
)


def label_row(**over):
    row = {
        "trajectory_id": "t1",
        "question_id": "hotpotqa/1",
        "mode": "undirected_shortest",
        "target_mode": "thought_and_answer",
        "correct": True,
        "initial_entities": ["a"],
        "target_entities": ["b"],
        "kept_triplet_ids": ["t1#t0"],
        "kept_pair_ids": ["p0"],
        "kept_step_indices": [0, 1],
        "path_found": True,
        "admin_dropped": 0,
        "filtered_tokens": 3,
        "total_tokens": 10,
        "fa_ratio": 0.3,
        "tokenizer": "whitespace",
    }
    row.update(over)
    return row


def test_valid_rows_roundtrip(tmp_path):
    write_parquet([label_row(), label_row(trajectory_id="t2")], tmp_path / "l.parquet", "labels")
    assert [r["trajectory_id"] for r in read_rows(tmp_path / "l.parquet")] == ["t1", "t2"]


def test_missing_required_column_names_row_and_column():
    with pytest.raises(
        SchemaError, match=r"labels: row 1 \(trajectory_id='t2'\): required column 'fa_ratio'"
    ):
        to_table([label_row(), label_row(trajectory_id="t2", fa_ratio=None)], LABELS, "labels")


def test_wrong_type_names_row_and_column():
    with pytest.raises(SchemaError, match=r"column 'kept_step_indices', row 2"):
        to_table([label_row(), label_row(), label_row(kept_step_indices=["x"])], LABELS, "labels")


def test_unknown_column_is_rejected():
    with pytest.raises(SchemaError, match="not in the contract"):
        to_table([label_row(extra=1)], LABELS, "labels")


def test_null_inside_a_required_nested_field_is_rejected():
    from schemas import SUPERVISION

    row = {
        "example_id": "e",
        "variant": "backtrace",
        "round": 0,
        "trajectory_id": "t",
        "question_id": "q",
        "dataset": "hotpotqa",
        "question_norm": "q",
        "step_index": 0,
        "step_kind": "explore",
        "messages": [{"role": "user", "content": None}],
        "units_total": 1,
        "units_kept": 1,
        "seed": 0,
        "policy": "base",
    }
    with pytest.raises(SchemaError, match="messages"):
        to_table([row], SUPERVISION, "supervision")


def test_validate_table_checks_a_columnar_table():
    good = to_table([label_row()], LABELS, "labels")
    assert validate_table(good, LABELS, "labels").num_rows == 1
    bad = good.drop_columns(["fa_ratio"])
    with pytest.raises(SchemaError, match="fa_ratio"):
        validate_table(bad, LABELS, "labels")
    assert pa.types.is_list(LABELS.field("kept_triplet_ids").type)


def test_streamed_batches_are_checked_and_a_bad_batch_leaves_no_file(tmp_path):
    good = to_table([label_row(), label_row(trajectory_id="t2")], LABELS, "labels")
    out = tmp_path / "l.parquet"
    assert write_parquet_batches([good, good.slice(0, 1)], out, "labels") == 3
    assert [r["trajectory_id"] for r in read_rows(out)] == ["t1", "t2", "t1"]
    out.unlink()
    bad = good.set_column(
        good.schema.get_field_index("fa_ratio"), "fa_ratio", pa.array([None, 0.5], pa.float64())
    )
    with pytest.raises(SchemaError, match="fa_ratio"):
        write_parquet_batches([good, bad], out, "labels")
    assert list(tmp_path.iterdir()) == []  # neither the file nor its temporary remains


def test_a_missing_round_input_names_the_command_that_makes_it(tmp_path):
    missing = tmp_path / "round_1.parquet"
    with pytest.raises(FactoryError) as err:
        read_round_input(missing, "trajectories", "random", 1, 2)
    assert str(err.value) == (
        f"{missing} is missing: run `factory trajectories --variant random --round 1 --seed 2` first"
    )
    write_parquet([], missing, "counterfactual")
    assert read_round_input(missing, "trajectories", "random", 1, 2) == []
