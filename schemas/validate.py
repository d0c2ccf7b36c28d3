"""Checking rows and tables against a contract: a violation raises ``SchemaError`` naming the
artifact, the column and the row."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from factory.utils.errors import FactoryError


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


def _loose(typ: pa.DataType) -> pa.DataType:
    """A type with every field nullable, list items unnamed, large variants as the plain ones and
    integers (floats) of any width as one: what two files of the same contract can differ in (a
    table round-tripped through pandas widens its integers) without holding other values."""
    if pa.types.is_large_string(typ):
        return pa.string()
    if pa.types.is_integer(typ):
        return pa.int64()
    if pa.types.is_floating(typ):
        return pa.float64()
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return pa.list_(_loose(typ.value_type))
    if pa.types.is_struct(typ):
        return pa.struct([pa.field(f.name, _loose(f.type)) for f in typ])
    return typ


def _looser(found: pa.Field, wanted: pa.Field) -> bool:
    """Whether the file allows nulls somewhere the contract requires a value."""
    if found.nullable and not wanted.nullable:
        return True
    if pa.types.is_struct(wanted.type):
        return any(_looser(found.type.field(f.name), f) for f in wanted.type)
    if pa.types.is_list(wanted.type):
        return _looser(found.type.value_field, wanted.type.value_field)
    return False


def contract_problems(parquet: pq.ParquetFile, schema: pa.Schema) -> list[str]:
    """What keeps a parquet file from matching ``schema``: missing and extra columns, other types,
    nulls in required fields (counted only where the file's own schema allows them: a file the
    factory wrote never needs its data read)."""
    found = parquet.schema_arrow
    problems = [f"column {name!r} is missing" for name in schema.names if name not in found.names]
    problems += [
        f"column {name!r} is not in the contract" for name in found.names if name not in schema.names
    ]
    for wanted in schema:
        if wanted.name not in found.names:
            continue
        field = found.field(wanted.name)
        if pa.types.is_null(field.type) and wanted.nullable:
            continue  # all null, as pandas writes an optional column without a value: allowed
        if not _loose(field.type).equals(_loose(wanted.type)):
            problems.append(f"column {wanted.name!r} is {field.type}, not {wanted.type}")
        elif _looser(field, wanted):
            column = parquet.read(columns=[wanted.name]).column(0)
            if not wanted.nullable and column.null_count:
                nulls = f"{column.null_count} null{'s' if column.null_count > 1 else ''}"
                problems.append(f"column {wanted.name!r} has {nulls} but is required")
                continue
            try:
                for chunk in column.cast(wanted.type).chunks:
                    _check_nested_nulls(chunk, wanted.type, wanted.name)
            except (ValueError, pa.ArrowException) as exc:
                problems.append(f"column {wanted.name!r}: {exc}")
    return problems
