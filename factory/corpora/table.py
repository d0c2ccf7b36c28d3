"""Column-wise construction of the questions table.

A question's ``passages`` column repeats its context pool (titles and sentences) for every
question, and paragraphs recur across questions. Converting those strings from Python objects
dominates ingest time, so the column is assembled in Arrow instead: each question's passages
are taken by index from the de-duplicated passages table (a C++ copy), and Python only supplies
the indices. Batches keep the column's memory small and reused (fresh pages cost more than the copy).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from schemas import QUESTION, ROW_GROUP_SIZE


def take_lists(lists: pa.ListArray, indices: np.ndarray) -> pa.ListArray:
    """``lists.take(indices)`` via offsets arithmetic (several times faster than Arrow's list take)."""
    offsets = np.asarray(lists.offsets, dtype=np.int64)
    starts, lengths = offsets[:-1][indices], np.diff(offsets)[indices]
    new_offsets = np.zeros(len(indices) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    flat = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1], dtype=np.int64)
    values = lists.values.take(pa.array(flat))
    return pa.ListArray.from_arrays(pa.array(new_offsets.astype(np.int32)), values, type=lists.type)


def question_batches(questions: list[dict], passages: pa.Table, batch_rows: int = ROW_GROUP_SIZE) -> Iterator[pa.Table]:
    """The questions table in batches of ``batch_rows`` (one parquet row group each), so that the
    big ``passages`` column is built, written and freed a batch at a time; ``write_parquet_batches``
    checks each against the contract."""
    position = {pid: i for i, pid in enumerate(passages.column("pid").to_pylist())}
    column = {name: passages.column(name).combine_chunks() for name in ("pid", "title", "sentences")}
    for start in range(0, len(questions), batch_rows):
        yield _questions_table(questions[start:start + batch_rows], position, column)


def _questions_table(questions: list[dict], position: dict[str, int], column: dict[str, pa.Array]) -> pa.Table:
    offsets, indices = [0], []
    for q in questions:
        indices.extend(position[p["pid"]] for p in q["passages"])
        offsets.append(len(indices))
    take = np.array(indices, dtype=np.int64)
    pool = pa.StructArray.from_arrays(
        [column["pid"].take(take), column["title"].take(take), take_lists(column["sentences"], take)],
        fields=list(QUESTION.field("passages").type.value_type),
    )
    columns = []
    for field in QUESTION:
        if field.name == "passages":
            columns.append(pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pool, type=field.type))
        else:
            columns.append(pa.array([q.get(field.name) for q in questions], type=field.type))
    return pa.Table.from_arrays(columns, schema=QUESTION)
