"""Data contracts of every artifact (DESIGN §8) and validate-on-write.

Each artifact has a pyarrow schema here. ``write_parquet`` checks rows against it and writes
atomically; a violation raises ``SchemaError`` naming the artifact, the column and the row.
Fields marked ``nullable=False`` are required. Contracts are shared across stages: extend them,
never rename a field.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from factory.errors import FactoryError

S, I32, I64, F64, B = pa.string(), pa.int32(), pa.int64(), pa.float64(), pa.bool_()


def _req(name: str, typ: pa.DataType) -> pa.Field:
    return pa.field(name, typ, nullable=False)


def _opt(name: str, typ: pa.DataType) -> pa.Field:
    return pa.field(name, typ, nullable=True)


MESSAGE = pa.struct([_req("role", S), _req("content", S)])
PASSAGE_REF = pa.struct([_req("pid", S), _req("title", S), _req("sentences", pa.list_(S))])
SUPPORT = pa.struct([_req("title", S), _req("sent_idx", I32), _req("pid", S)])  # pid: the resolved passage
TRIPLE = pa.struct([_req("subject", S), _req("relation", S), _req("object", S)])
DECOMPOSITION = pa.struct(
    [_req("id", S), _req("question", S), _req("answer", S), _opt("paragraph_support_idx", I32)]
)

QUESTION = pa.schema(
    [
        _req("question_id", S),  # "<dataset>/<source id>"
        _req("dataset", S),  # hotpotqa | 2wikimultihopqa | musique
        _req("source_id", S),
        _req("split", S),  # train | heldout | test
        _req("question", S),
        _req("question_norm", S),  # normalised text: the key of duplicate detection and leakage checks
        _req("answers", pa.list_(S)),  # gold answer first, then aliases
        _req("qtype", S),  # the corpus's own type (bridge, comparison, 2hop, ...)
        _opt("level", S),
        _req("route", S),  # chain | parallel (DTKG)
        _req("hops", I32),
        _req("passages", pa.list_(PASSAGE_REF)),  # the question's own context pool, in corpus order
        _req("supporting", pa.list_(SUPPORT)),  # MuSiQue: supporting paragraphs with sent_idx = -1
        _opt("evidences", pa.list_(TRIPLE)),  # 2Wiki
        _opt("decomposition", pa.list_(DECOMPOSITION)),  # MuSiQue
        _req("source_file", S),
    ]
)

PASSAGE = pa.schema(
    [_req("pid", S), _req("dataset", S), _req("title", S), _req("text", S), _req("sentences", pa.list_(S))]
)

PAIR = pa.struct([_req("pair_id", S), _req("entity", S), _req("relation", S)])
STEP = pa.struct(
    [
        _req("index", I32),
        _req("kind", S),  # explore | complete | final
        _req("messages", pa.list_(MESSAGE)),  # the prompt as sent (hint-free for rationalized trajectories)
        _req("output", S),  # raw model output of the accepted attempt (last attempt on failure)
        _req("status", S),  # ok | parse_error | llm_error
        _opt("error", S),
        _opt("sufficient", B),
        _opt("thought", S),
        _opt("answer", S),
        _req("pairs", pa.list_(PAIR)),  # explore: the pairs asked for
        _opt("pair_id", S),  # complete: the pair it answers
        _req("retrieved", pa.list_(S)),  # complete: pids shown
        _req("triplet_ids", pa.list_(S)),  # complete: new triplets it added to G
        _req("attempts", I32),  # 1 + repair re-asks
        _req("prompt_tokens", I32),
        _req("completion_tokens", I32),
        _req(
            "latency_s", F64
        ),  # as first measured (the response cache replays it): reruns stay byte-identical
    ]
)
TRIPLET = pa.struct(
    [
        _req("triplet_id", S),
        _req("step_index", I32),
        _opt("pair_id", S),
        _req("subject", S),
        _req("relation", S),
        _req("object", S),
        _opt("source_pid", S),  # grounding passage; null = ungrounded
        _opt("source_sentence", I32),
        _opt("grounding_score", F64),
    ]
)
TRAJECTORY = pa.schema(
    [
        _req("trajectory_id", S),
        _req("question_id", S),
        _req("dataset", S),
        _req("split", S),
        _req("qtype", S),
        _req("route", S),
        _req("policy", S),  # base | <variant>-r<round> | scripted | simulated
        _req("round", I32),
        _req("sample", I32),
        _req("seed", I64),
        _req("question", S),
        _req("answers", pa.list_(S)),
        _req("prompt_version", S),
        _req("model", S),  # model identity (name + adapter hash)
        _req("status", S),  # ok | max_iterations | parse_error | llm_error
        _opt("error", S),
        _opt("answer", S),
        _opt("final_thought", S),
        _req("em", F64),
        _req("f1", F64),
        _req("correct", B),
        _req("rationalized", B),
        _req("steps", pa.list_(STEP)),
        _req("triplets", pa.list_(TRIPLET)),
        _opt("stop_reason", S),  # sufficient | no_new_triplets | max_iterations | parse_error | llm_error
        _opt("llm_calls", I32),  # every call, repairs included
        _opt("prompt_tokens", I64),  # totals over every call, repairs included
        _opt("completion_tokens", I64),
        _opt("latency_s", F64),
    ]
)

LABELS = pa.schema(
    [
        _req("trajectory_id", S),
        _req("question_id", S),
        _req("mode", S),
        _req("target_mode", S),
        _req("correct", B),
        _req("initial_entities", pa.list_(S)),
        _req("target_entities", pa.list_(S)),
        _req("kept_triplet_ids", pa.list_(S)),
        _req("kept_pair_ids", pa.list_(S)),
        _req("kept_step_indices", pa.list_(I32)),
        _req("path_found", B),
        _req("admin_dropped", I32),
        _req("filtered_tokens", I64),
        _req("total_tokens", I64),
        _req("fa_ratio", F64),
        _req("tokenizer", S),
    ]
)

COUNTERFACTUAL = pa.schema(
    [
        _req("record_id", S),  # "<trajectory_id>/<condition>" (+ "/seed_<k>" for without_random)
        _req("trajectory_id", S),
        _req("question_id", S),
        _req("dataset", S),
        _req("qtype", S),
        _req("route", S),
        _req("variant", S),
        _req("round", I32),
        _req("protocol_seed", I64),
        _req("policy", S),  # the policy re-asked: the one that generated the round
        _req("model", S),  # its backend identity (model + adapter hash)
        _req("prompt_version", S),  # the trajectory's: its forced-final prompt is re-asked
        _req("mode", S),  # the backtrace mode x target mode whose S_q is tested
        _req("target_mode", S),
        _req("condition", S),  # full | without_sq | only_sq | without_random | closed_book
        _opt("random_seed", I64),  # without_random: the draw's seed (recorded); null otherwise
        _req("graph_size", I32),  # |G|
        _req("sq_size", I32),  # |S_q|
        _req("shown_triplet_ids", pa.list_(S)),  # the graph of this condition, in G's order
        _req("output", S),  # raw reply of the accepted (or last) attempt
        _req("status", S),  # ok | parse_error | llm_error
        _opt("error", S),
        _opt("answer", S),
        _req("em", F64),
        _req("f1", F64),
        _req("correct", B),
        _opt("parametric", B),  # the trajectory's closed_book answer is correct (null: not asked closed-book)
        _req("attempts", I32),  # 1 + repair re-asks
        _req("prompt_tokens", I32),
        _req("completion_tokens", I32),
    ]
)

SUPERVISION = pa.schema(
    [
        _req("example_id", S),
        _req("variant", S),
        _req("round", I32),  # the round whose trajectories produced it
        _req("trajectory_id", S),
        _req("question_id", S),
        _req("dataset", S),
        _req("question_norm", S),
        _req("step_index", I32),
        _req("step_kind", S),
        _req("messages", pa.list_(MESSAGE)),  # system/user prompt, then the (re-rendered) assistant output
        _req("units_total", I32),  # pairs (explore) or triplets (complete) the step generated
        _req("units_kept", I32),
        _req("seed", I64),  # random control seed (recorded for every variant)
        _req("policy", S),
    ]
)

ROUND_METRICS = pa.schema(
    [
        _req("variant", S),
        _req("round", I32),
        _req("seed", I64),
        _req("status", S),  # trained | empty | skipped | base
        _opt("heldout_em", F64),
        _opt("heldout_f1", F64),
        _opt("best_round", I32),
        _opt("best_em", F64),
        _req("examples", I64),
        _opt("fa_ratio", F64),
        _opt("reason", S),
    ]
)

_TRACE_IDS = [
    _req("record_id", S),  # "<variant>/seed_<s>/round_<r>/<trajectory_id>"
    _req("variant", S),
    _req("round", I32),
    _req("seed", I64),  # protocol seed of the chain
    _req("trajectory_id", S),
    _req("question_id", S),
    _req("dataset", S),
    _req("qtype", S),
    _req("route", S),
    _req("policy", S),
]
_TRACE_GOLD = [
    _req("passage_ids", pa.list_(S)),  # the numbered passages [1]..[n], in order
    _req("gold_answers", pa.list_(S)),  # gold answer first, then aliases
    _req("gold_relevant_indices", pa.list_(I32)),  # numbered passages that are gold supporting paragraphs
    _req("gold_coverage", S),  # full | partial | none: share of gold paragraphs among the numbered passages
]
TRACE_SFT = pa.schema(
    _TRACE_IDS
    + [
        _req(
            "messages", pa.list_(MESSAGE)
        ),  # system (protocol), user (question + passages), assistant (target)
        _req("relevance", pa.list_(I32)),  # the target's <relevance> indices
        _req("triplet_ids", pa.list_(S)),  # kept triplets stated in the analysis, in chain order
        _req("answer", S),
    ]
    + _TRACE_GOLD
    + [
        _req(f"reward_{c}", F64) for c in ("format", "accuracy", "relevance", "bonus")
    ]  # what the target earns
)
TRACE_RL = pa.schema(
    _TRACE_IDS
    + [_req("prompt", pa.list_(MESSAGE))]
    + _TRACE_GOLD  # prompt: system + user (TRL conversational)
)

ROUTE_PREDICTIONS = pa.schema(
    [
        _req("question_id", S),
        _req("dataset", S),
        _req("qtype", S),
        _req("gold", S),  # the corpus-derived route
        _req("predicted", S),  # parallel | chain | unknown
        _req("raw", S),  # the model's reply
        _opt("error", S),  # the LLM error when the call failed
        _req("prompt_version", S),
    ]
)

# validate-labels with grounding.judge=llm: one row per lexically grounded triplet of a scored trajectory
ENTAILMENT = pa.schema(
    [
        _req("trajectory_id", S),
        _req("triplet_id", S),
        _req("question_id", S),
        _req("pid", S),  # the passage lexical grounding attributes the triplet to
        _opt("sentence", I32),  # the grounding sentence within it
        _req("subject", S),
        _req("relation", S),
        _req("object", S),
        _opt("entailed", B),  # the judge's verdict: does the passage state the triplet? null: no verdict
        _req("reason", S),  # the judge's reason, or why there is no verdict
        _req("judge", S),  # the judge's model identity
        _req("prompt_version", S),
    ]
)

ARTIFACTS: dict[str, pa.Schema] = {
    "question": QUESTION,
    "passage": PASSAGE,
    "trajectory": TRAJECTORY,
    "labels": LABELS,
    "counterfactual": COUNTERFACTUAL,
    "supervision": SUPERVISION,
    "round_metrics": ROUND_METRICS,
    "trace_sft": TRACE_SFT,
    "trace_rl": TRACE_RL,
    "route_predictions": ROUTE_PREDICTIONS,
    "entailment": ENTAILMENT,
}


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


ROW_GROUP_SIZE = 4096  # rows per parquet row group of every artifact
# Artifacts repeat strings across rows (a paragraph in many questions' pools, a prompt in many steps).
# Arrow's default 1 MiB dictionary page makes such columns fall back to plain encoding; 8 MiB keeps
# them dictionary-encoded: on 100k ingested questions the file is 4x smaller, written 2x faster.
DICTIONARY_PAGE_LIMIT = 8 << 20


def _atomic_path(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}")


def write_parquet(rows_or_table: Iterable[dict] | pa.Table, path: str | Path, artifact: str) -> pa.Table:
    """Validate against the artifact's contract and write atomically (tmp file + rename).

    Output is deterministic: same rows, same bytes (no timestamps, fixed row-group size).
    """
    schema = ARTIFACTS[artifact]
    if isinstance(rows_or_table, pa.Table):
        table = validate_table(rows_or_table, schema, artifact)
    else:
        table = to_table(list(rows_or_table), schema, artifact)
    _write_checked([table], path, schema)
    return table


def write_parquet_batches(batches: Iterable[pa.Table], path: str | Path, artifact: str) -> int:
    """Write tables one after another into one parquet file, each checked against the artifact's
    contract, atomically and deterministically like ``write_parquet``. Streaming batches keeps a
    big artifact from being whole in memory. Returns the row count."""
    schema = ARTIFACTS[artifact]
    return _write_checked((validate_table(batch, schema, artifact) for batch in batches), path, schema)


def _write_checked(tables: Iterable[pa.Table], path: str | Path, schema: pa.Schema) -> int:
    """Write tables already checked against ``schema``: tmp file + rename, zstd, fixed row groups."""
    path = Path(path)
    tmp = _atomic_path(path)
    rows = 0
    try:
        # One writer thread: parquet encodes and compresses without the GIL, so while it writes a
        # batch this thread builds the next one (``tables`` is often a generator). Writes stay in order.
        with (
            pq.ParquetWriter(
                tmp,
                schema,
                compression="zstd",
                write_statistics=True,
                dictionary_pagesize_limit=DICTIONARY_PAGE_LIMIT,
            ) as writer,
            ThreadPoolExecutor(max_workers=1) as writing,
        ):
            pending = None
            for table in tables:
                if pending is not None:
                    pending.result()
                pending = writing.submit(writer.write_table, table, row_group_size=ROW_GROUP_SIZE)
                rows += table.num_rows
            if pending is not None:
                pending.result()
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return rows


def read_rows(path: str | Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    """Read a parquet artifact as a list of plain dicts (the form library functions take)."""
    return pq.read_table(path, columns=columns).to_pylist()


def read_round_input(
    path: str | Path, stage: str, variant: str, round_: int, seed: int
) -> list[dict[str, Any]]:
    """``read_rows`` of an artifact that ``factory <stage>`` writes for one round of a chain; when it is
    missing, an error that names the command to run first."""
    if not Path(path).exists():
        raise FactoryError(
            f"{path} is missing: run `factory {stage} --variant {variant} --round {round_} --seed "
            f"{seed}` first"
        )
    return read_rows(path)
