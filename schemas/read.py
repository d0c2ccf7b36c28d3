"""Reading artifacts: only the columns and the rows a stage needs, a row group at a time.

This is how a stage reads a table:

- ``read_rows(path, columns=[...], where={"question_id": ids})``: plain dict rows, the form library
  functions take, of the matching rows only, in file order;
- ``iter_rows`` / ``iter_batches``: the same, streamed, for tables too big to hold whole;
- ``read_table``: the Arrow table;
- ``num_rows``: the row count, from the file's footer.

``columns`` may name a nested field by its parquet path (``"passages.list.element.pid"``): the
struct is then read with that field alone. ``where`` keeps the rows whose column value is in a
set; it is applied to each row group as it is read, so memory is one row group plus the matches.
Passages are looked up by pid through ``factory.retrieval.store.PassageStore``, not read here.

Every read opens the file through ``open_parquet``: an artifact of the pipeline (known by where it
lives, ``factory.utils.paths.producer``) is checked against its contract first, from its footer (and, for a
file written by other code, the null counts of its required columns), so a hand-edited artifact is
refused with the column at fault and the command that rewrites it, before a stage computes (or
writes) anything from it. An output of the running stage not yet published is read from its
temporary (``factory.utils.io.pending``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from factory.utils.errors import FactoryError
from factory.utils.io import damaged, pending
from factory.utils.paths import producer
from schemas.contracts import ARTIFACTS
from schemas.validate import contract_problems
from schemas.write import ROW_GROUP_SIZE

Where = Mapping[str, Collection[Any]]


def iter_batches(
    path: str | Path,
    columns: list[str] | None = None,
    where: Where | None = None,
    batch_rows: int = ROW_GROUP_SIZE,
    row_groups: list[int] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The file's rows in batches of at most ``batch_rows``, ``columns`` only, filtered by ``where``
    (``row_groups``: those row groups alone)."""
    where = dict(where or {})
    wanted = None if columns is None else list(columns)
    read = None if wanted is None else wanted + [c for c in where if c not in wanted]
    parquet = open_parquet(path)
    types = parquet.schema_arrow
    sets = {column: pa.array(list(values), type=types.field(column).type) for column, values in where.items()}
    batches = parquet.iter_batches(
        batch_size=batch_rows, row_groups=row_groups, columns=read, use_threads=False
    )
    for batch in decoded(batches, path):
        if sets:
            mask = None
            for column, values in sets.items():
                hit = pc.is_in(batch.column(column), value_set=values)
                mask = hit if mask is None else pc.and_(mask, hit)
            batch = batch.filter(mask)
            if wanted is not None and len(read) > len(wanted):
                batch = batch.select([name for name in batch.schema.names if name in _top(wanted)])
        yield batch


def _top(columns: list[str]) -> set[str]:
    """Top-level names of (possibly nested) column paths."""
    return {c.split(".", 1)[0] for c in columns}


def iter_rows(
    path: str | Path, columns: list[str] | None = None, where: Where | None = None
) -> Iterator[dict]:
    """``iter_batches`` as plain dict rows."""
    for batch in iter_batches(path, columns, where):
        yield from batch.to_pylist()


def _whole(columns: list[str] | None, where: Where | None) -> bool:
    """Whether ``pq.read_table`` can read it all at once (multithreaded): no filter, no nested path."""
    return not where and not any("." in c for c in columns or ())


def read_table(path: str | Path, columns: list[str] | None = None, where: Where | None = None) -> pa.Table:
    """The matching rows as one Arrow table."""
    if _whole(columns, where):
        return _read_whole(path, columns)
    batches = list(iter_batches(path, columns, where))
    if not batches:  # a file without rows
        return _read_whole(path, sorted(_top(columns)) if columns else None)
    return pa.Table.from_batches(batches)


def read_rows(path: str | Path, columns: list[str] | None = None, where: Where | None = None) -> list[dict]:
    """The matching rows as plain dicts, in file order."""
    if _whole(columns, where):
        return _read_whole(path, columns).to_pylist()
    return [row for batch in iter_batches(path, columns, where) for row in batch.to_pylist()]


def _read_whole(path: str | Path, columns: list[str] | None) -> pa.Table:
    parquet = open_parquet(path)
    try:
        return parquet.read(columns=columns)
    except (pa.ArrowException, OSError) as exc:  # OSError: a page that does not decompress
        raise damaged(path, exc) from None


def decoded(batches: Iterator[pa.RecordBatch], path: str | Path) -> Iterator[pa.RecordBatch]:
    """``batches`` of the parquet file ``path``; a row group that does not decode (a flipped byte:
    "ZSTD decompression failed") is a ``damaged`` error naming the file and how to restore it."""
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as exc:
            raise damaged(path, exc) from None
        yield batch


def columns_except(schema: pa.Schema, column: str, fields: Collection[str]) -> list[str]:
    """Every column of ``schema``, with the list-of-struct ``column`` read without ``fields`` (e.g. a
    trajectory's steps without their prompts: ``columns_except(TRAJECTORY, "steps", ["messages"])``)."""
    out = []
    for field in schema:
        if field.name != column:
            out.append(field.name)
            continue
        struct = field.type.value_type
        out += [f"{column}.list.element.{child.name}" for child in struct if child.name not in fields]
    return out


def num_rows(path: str | Path) -> int:
    """Rows in a parquet artifact, from its footer (nothing else is read)."""
    return open_parquet(path).metadata.num_rows


def open_parquet(path: str | Path) -> pq.ParquetFile:
    """The parquet file at ``path`` (its temporary while the running stage has yet to publish it),
    checked against its contract when it is an artifact of the pipeline; a ``FactoryError`` naming
    the file, the column and the command that rewrites it otherwise."""
    artifact, command = producer(path)
    redo = f"`{command}` rewrites it" if command else "write it again"
    try:
        parquet = pq.ParquetFile(pending(path))
    except FileNotFoundError:
        raise FactoryError(f"{path} is missing: {redo}") from None
    except IsADirectoryError:
        raise FactoryError(f"{path} is a folder, not a parquet file: {redo}") from None
    except (pa.ArrowException, OSError) as exc:  # not parquet, cut short, unreadable
        raise damaged(path, f"not a readable parquet file: {exc}") from None
    if artifact is not None:
        problems = contract_problems(parquet, ARTIFACTS[artifact])
        if problems:
            raise FactoryError(
                f"{path} does not match the {artifact!r} contract (schemas/contracts.py): "
                f"{'; '.join(problems)}. It was edited or written by other code: {redo} (`dvc repro` "
                "restores it)"
            )
    return parquet


def read_round_input(
    path: str | Path,
    stage: str,
    variant: str,
    round_: int,
    seed: int,
    columns: list[str] | None = None,
    where: Where | None = None,
) -> list[dict[str, Any]]:
    """``read_rows`` of an artifact that ``factory <stage>`` writes for one round of a chain; when it is
    missing, an error that names the command to run first."""
    require(path, f"run `factory {stage} --variant {variant} --round {round_} --seed {seed}` first")
    return read_rows(path, columns, where)


def require(path: str | Path, what_to_do: str) -> Path:
    """``path``, or a FactoryError saying it is missing and what to run."""
    if not Path(path).exists():
        raise FactoryError(f"{path} is missing: {what_to_do}")
    return Path(path)
