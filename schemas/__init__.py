"""Data contracts of every artifact (docs/design.md §8), and how artifacts are written and read.

- ``schemas.contracts``: one pyarrow schema per artifact (``ARTIFACTS`` by name);
- ``schemas.validate``: rows and tables checked against a contract (``SchemaError`` names the
  artifact, the column and the row);
- ``schemas.write``: validate-on-write, atomic and deterministic, streamed (``ParquetStream``);
- ``schemas.read``: only the columns and rows a stage needs, a row group at a time.

The names below are the package's face: ``from schemas import read_rows, write_parquet``.
"""

from schemas.contracts import (
    ARTIFACTS,
    COUNTERFACTUAL,
    ENTAILMENT,
    EVAL_QUESTION,
    KEPT,
    LABELS,
    MESSAGE,
    PASSAGE,
    PASSAGE_REF,
    QUESTION,
    ROUND_METRICS,
    ROUTE_PREDICTIONS,
    STEP,
    SUPERVISION,
    SUPPORT,
    TRACE_RL,
    TRACE_SFT,
    TRAJECTORY,
    TRIPLET,
)
from schemas.read import (
    columns_except,
    iter_batches,
    iter_rows,
    num_rows,
    open_parquet,
    read_round_input,
    read_rows,
    read_table,
    require,
)
from schemas.validate import SchemaError, to_table, validate_table
from schemas.write import ROW_GROUP_SIZE, ParquetStream, write_parquet, write_parquet_batches

__all__ = [
    "ARTIFACTS",
    "COUNTERFACTUAL",
    "ENTAILMENT",
    "EVAL_QUESTION",
    "LABELS",
    "MESSAGE",
    "PASSAGE",
    "PASSAGE_REF",
    "QUESTION",
    "ROUND_METRICS",
    "ROUTE_PREDICTIONS",
    "ROW_GROUP_SIZE",
    "STEP",
    "SUPERVISION",
    "KEPT",
    "SUPPORT",
    "TRACE_RL",
    "TRACE_SFT",
    "TRAJECTORY",
    "TRIPLET",
    "ParquetStream",
    "SchemaError",
    "columns_except",
    "iter_batches",
    "iter_rows",
    "num_rows",
    "open_parquet",
    "read_round_input",
    "read_rows",
    "read_table",
    "require",
    "to_table",
    "validate_table",
    "write_parquet",
    "write_parquet_batches",
]
