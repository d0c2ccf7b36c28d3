"""Column-wise construction of the questions table.

A question's ``passages`` column repeats its context pool (titles and sentences) for every
question, and paragraphs recur across questions. Converting those strings from Python objects
would dominate ingest time, so the column is assembled in Arrow instead: each question's passages
are taken by index from the pool's entries (a C++ copy), and Python only supplies the indices.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain

import numpy as np
import pyarrow as pa

from factory.corpora.pool import PassagePool
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


def question_batches(
    rows: list[dict], pool: PassagePool, batch_rows: int = ROW_GROUP_SIZE
) -> Iterator[pa.Table]:
    """The questions table in batches of ``batch_rows`` (one parquet row group each) from rows whose
    ``passages`` are entries of ``pool``, so that the big ``passages`` column is built, written and
    freed a batch at a time; ``write_parquet_batches`` checks each against the contract."""
    column = pool.columns()
    for start in range(0, len(rows), batch_rows):
        yield _questions_table(rows[start : start + batch_rows], column)


def _questions_table(rows: list[dict], column: dict[str, pa.Array]) -> pa.Table:
    offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    np.cumsum([len(q["passages"]) for q in rows], out=offsets[1:])
    take = np.fromiter(
        chain.from_iterable(q["passages"] for q in rows), dtype=np.int64, count=int(offsets[-1])
    )
    pool = pa.StructArray.from_arrays(
        [column["pid"].take(take), column["title"].take(take), take_lists(column["sentences"], take)],
        fields=list(QUESTION.field("passages").type.value_type),
    )
    columns = []
    for field in QUESTION:
        if field.name == "passages":
            columns.append(pa.ListArray.from_arrays(pa.array(offsets), pool, type=field.type))
        else:
            columns.append(pa.array([q.get(field.name) for q in rows], type=field.type))
    return pa.Table.from_arrays(columns, schema=QUESTION)
