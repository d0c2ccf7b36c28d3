"""Column-wise construction of the questions table.

A question's ``passages`` column repeats its context pool (titles and sentences) for every
question, and paragraphs recur across questions. Converting those strings from Python objects
would dominate ingest time, so the column is assembled in Arrow instead: each question's passages
are taken by index from the pool's entries (a C++ copy), and Python only supplies the indices.
"""

from __future__ import annotations

from itertools import chain

import numpy as np
import pyarrow as pa

from factory.corpora.pool import PassagePool
from schemas import QUESTION


def take_lists(lists: pa.ListArray, indices: np.ndarray) -> pa.ListArray:
    """``lists.take(indices)`` via offsets arithmetic (several times faster than Arrow's list take)."""
    offsets = np.asarray(lists.offsets, dtype=np.int64)
    starts, lengths = offsets[:-1][indices], np.diff(offsets)[indices]
    new_offsets = np.zeros(len(indices) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    flat = np.repeat(starts - new_offsets[:-1], lengths) + np.arange(new_offsets[-1], dtype=np.int64)
    values = lists.values.take(pa.array(flat))
    return pa.ListArray.from_arrays(pa.array(new_offsets.astype(np.int32)), values, type=lists.type)


def questions_table(rows: list[dict], pool: PassagePool) -> pa.Table:
    """The questions table of ``rows`` whose ``passages`` are entries of ``pool`` (ingest builds one
    per row group, so the big ``passages`` column is built, written and freed a row group at a time)."""
    column = pool.columns()
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
