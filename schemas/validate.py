"""Checking rows and tables against a contract: a violation raises ``SchemaError`` naming the
artifact, the column and the row."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from factory.errors import FactoryError


class SchemaError(FactoryError):
    """Rows that do not match an artifact's contract."""


def _check_required(rows: Sequence[dict], schema: pa.Schema, artifact: str) -> None:
    names = set(schema.names)
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise SchemaError(f"{artifact}: row {i} is a {type(row).__name__}, not a record")
        extra = set(row) - names
        if extra:
            raise SchemaError(f"{artifact}: row {i} has columns not in the contract: {sorted(extra)}")
        for field in schema:
            if not field.nullable and row.get(field.name) is None:
                raise SchemaError(
                    f"{artifact}: row {i} ({_row_id(row)}): required column {field.name!r} is missing or null"
                )


def _row_id(row: dict) -> str:
    for key in ("example_id", "trajectory_id", "pid", "question_id"):  # most specific first
        if key in row:
            return f"{key}={row[key]!r}"
    return "no id"


def _find_bad_row(rows: Sequence[dict], field: pa.Field) -> tuple[int, str]:
    for i, row in enumerate(rows):
        try:
            arr = pa.array([row.get(field.name)], type=field.type)
            arr.validate(full=True)
            _check_nested_nulls(arr, field.type, field.name)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            return i, str(exc).splitlines()[0]
    return -1, ""


def _check_nested_nulls(arr: pa.Array, typ: pa.DataType, path: str) -> None:
    """pyarrow accepts nulls in non-nullable nested fields; the contract does not."""
    if pa.types.is_list(typ):
        _check_nested_nulls(arr.flatten(), typ.value_type, path + "[]")
    elif pa.types.is_struct(typ):
        for j in range(typ.num_fields):
            child = typ.field(j)
            values = arr.field(j)
            if not child.nullable and values.null_count - arr.null_count > 0:
                raise ValueError(f"required field {path}.{child.name} is null")
            _check_nested_nulls(values, child.type, f"{path}.{child.name}")


def to_table(rows: Sequence[dict], schema: pa.Schema, artifact: str) -> pa.Table:
    """Rows -> Table with exactly ``schema``; raises SchemaError naming column and row."""
    rows = list(rows)
    _check_required(rows, schema, artifact)
    columns = []
    for field in schema:
        values = [row.get(field.name) for row in rows]
        try:
            col = pa.array(values, type=field.type)
            _check_nested_nulls(col, field.type, field.name)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            i, why = _find_bad_row(rows, field)
            where = f"row {i} ({_row_id(rows[i])})" if i >= 0 else "some row"
            raise SchemaError(f"{artifact}: column {field.name!r}, {where}: {why}") from None
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)


def validate_table(table: pa.Table, schema: pa.Schema, artifact: str) -> pa.Table:
    """Check a ready table (e.g. built column-wise) against the contract."""
    if not table.schema.equals(schema, check_metadata=False):
        missing = [n for n in schema.names if n not in table.schema.names]
        extra = [n for n in table.schema.names if n not in schema.names]
        wrong = [
            f"{f.name}: {table.schema.field(f.name).type} != {f.type}"
            for f in schema
            if f.name in table.schema.names and not table.schema.field(f.name).type.equals(f.type)
        ]
        try:
            table = table.select(schema.names).cast(schema)
        except (pa.ArrowException, KeyError, ValueError) as exc:  # ValueError: nulls cast to a required field
            raise SchemaError(
                f"{artifact}: table does not match the contract (missing {missing}, extra {extra}, types "
                f"{wrong}): {exc}"
            ) from None
    for field in schema:
        col = table.column(field.name)
        if not field.nullable and col.null_count:
            raise SchemaError(f"{artifact}: required column {field.name!r} has {col.null_count} nulls")
        try:
            for chunk in col.chunks:
                _check_nested_nulls(chunk, field.type, field.name)
        except ValueError as exc:
            raise SchemaError(f"{artifact}: column {field.name!r}: {exc}") from None
    return table
