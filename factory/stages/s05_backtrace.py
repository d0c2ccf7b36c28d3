"""Stage backtrace: label every trajectory of a round under every mode x target mode (DESIGN §2).

Reads data/trajectories/<V>/seed_<S>/round_<R>.parquet, writes data/labels/<V>/seed_<S>/round_<R>.parquet
(``schemas.LABELS``, one row per trajectory x mode x target mode, sorted) and
metrics/backtrace/<V>/seed_<S>/round_<R>.json: per mode x target mode the mean FA ratio over correct
trajectories, the share with no path found, mean kept triplets and admin-dropped triplets, overall,
by dataset and by route. Token counts use the policy's tokenizer (``llm.model``, else
``model.dir``, loaded offline); without one, whitespace tokens, recorded as such. With
``backtrace.answer_passage`` the sentences of the grounding passages come from the passage store
(data/index/passages; missing: the rule is off, said in the metrics). The trajectories are read a
row group at a time, without their prompts. A skipped round (empty trajectory file) writes an empty
labels file and status ``skipped``. Gated by ``validators.labels`` (Great Expectations).
"""

from __future__ import annotations

import logging

import pyarrow as pa

from factory import paths
from factory.backtrace.checks import BadTrajectory
from factory.backtrace.labels import backtrace_modes
from factory.backtrace.options import backtrace_options, load_token_counter
from factory.backtrace.summary import LabelSummary
from factory.backtrace.tokens import TokenCounter
from factory.bootstrap.rounds import skip_reason
from factory.config import Params
from factory.errors import FactoryError
from factory.io import progress, write_json
from factory.retrieval.store import PassageStore
from factory.stages import chain_arguments
from schemas import (
    LABELS,
    ROW_GROUP_SIZE,
    TRAJECTORY,
    columns_except,
    iter_batches,
    num_rows,
    require,
    to_table,
    write_parquet,
)

COMMAND = "backtrace"
HELP = "label a round's trajectories by knowledge backtracing (every mode x target mode), with FA ratios"
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    chain_arguments(parser, "bootstrapping round whose trajectories are labelled")


# A trajectory without its prompts: labels never read the messages, which are most of its bytes.
COLUMNS = columns_except(TRAJECTORY, "steps", ["messages"])


def passage_store(params: Params) -> tuple[PassageStore | None, str | None]:
    """(the passage store, None) for the answer-passage rule; (None, why) when it is off or missing."""
    if not params.backtrace.answer_passage:
        return None, "backtrace.answer_passage is false"
    try:
        return PassageStore.open(paths.INDEX_DIR), None
    except FactoryError as exc:
        return None, str(exc)


def grounding_passages(trajectories: list[dict], store: PassageStore | None) -> dict | None:
    """pid -> sentences of every passage that grounds a triplet of ``trajectories`` (None: rule off)."""
    if store is None:
        return None
    wanted = {x.get("source_pid") for t in trajectories for x in t.get("triplets") or []} - {None}
    return {pid: list(p["sentences"] or []) for pid, p in store.get_many(sorted(wanted)).items()}


def label_all(
    trajectories: list[dict], params: Params, counter: TokenCounter, passages: dict | None = None
) -> list[dict]:
    """Labels rows of every trajectory x params.backtrace.modes x target_modes."""
    bp = params.backtrace
    options = backtrace_options(params)
    rows = []
    for t in trajectories:
        try:
            rows.extend(
                backtrace_modes(t, bp.modes, bp.target_modes, tokenizer=counter, passages=passages, **options)
            )
        except BadTrajectory:
            raise
        except FactoryError as exc:
            raise FactoryError(f"trajectory {t.get('trajectory_id')!r}: {exc}") from None
    return rows


def run(params: Params, variant: str, round_: int, seed: int = 0) -> dict:
    import pandas as pd

    from validators import run_suites
    from validators.labels import labels_frame, labels_suite

    bp = params.backtrace
    src = paths.trajectories(variant, round_, seed)
    out = paths.labels(variant, round_, seed)
    metrics_path = paths.stage_metrics("backtrace", variant, round_, seed)
    require(src, f"run `factory trajectories --variant {variant} --round {round_} --seed {seed}` first")
    total = num_rows(src)
    head = {
        "variant": variant,
        "round": round_,
        "protocol_seed": seed,
        "modes": list(bp.modes),
        "target_modes": list(bp.target_modes),
    }
    if not total:
        try:
            reason = skip_reason(variant, round_, seed)
        except FactoryError:  # no decision recorded: the trajectories stage simply produced nothing
            reason = None
        metrics = {
            **head,
            "status": "skipped",
            "reason": reason or "the round's trajectory file is empty",
            "trajectories": 0,
            "labels": 0,
        }
        write_parquet([], out, "labels")
        write_json(metrics_path, metrics)
        log.info("backtrace %s round %d (seed %d): skipped: %s", variant, round_, seed, metrics["reason"])
        return metrics
    counter, fallback = load_token_counter(params)
    if fallback:
        log.warning("backtrace: no policy tokenizer (%s); counting whitespace tokens", fallback)
    store, passages_off = passage_store(params)
    if passages_off and bp.answer_passage:
        log.warning("backtrace: answer-passage rule off: %s", passages_off)
    # A row group of trajectories at a time: its labels go to Arrow (compact), its gate columns to a frame.
    tables, frames, meta = [], [], {}
    correct = 0
    with progress(total=total, desc="backtrace", unit="traj") as bar:
        for batch in iter_batches(src, COLUMNS):
            trajectories = batch.to_pylist()
            labels = label_all(trajectories, params, counter, grounding_passages(trajectories, store))
            tables.append(to_table(labels, LABELS, "labels"))
            frames.append(labels_frame(trajectories, labels))
            for t in trajectories:
                meta[t["trajectory_id"]] = (t["dataset"], t["route"], len(t["triplets"]))
                correct += 1 if t["correct"] else 0
            bar.update(len(trajectories))
    table = pa.concat_tables(tables).sort_by(
        [("trajectory_id", "ascending"), ("mode", "ascending"), ("target_mode", "ascending")]
    )
    gate = run_suites(
        f"backtrace-{variant}-seed_{seed}-round_{round_}",
        labels_suite(pd.concat(frames, ignore_index=True), len(meta), bp.modes, bp.target_modes),
        docs_dir=paths.GX_DOCS,
    )
    write_parquet(table, out, "labels")
    summary = LabelSummary(meta)
    for chunk in table.to_batches(max_chunksize=ROW_GROUP_SIZE):
        for row in chunk.to_pylist():
            summary.add(row)
    metrics = {
        **head,
        "status": "ok",
        "tokenizer": counter.name,
        "tokenizer_fallback_reason": fallback,
        "embedding_model": bp.embedding_model,
        "answer_passage": store is not None,
        "answer_passage_off_reason": passages_off,
        "trajectories": total,
        "correct": correct,
        "labels": table.num_rows,
        "expectations_passed": gate.evaluated,
        "default": f"{bp.mode}/{bp.target_mode}",
        "by_mode": summary.result(),
    }
    write_json(metrics_path, metrics)
    d = metrics["by_mode"].get(metrics["default"], {}).get("all", {})
    log.info(
        "backtrace %s round %d (seed %d): %d trajectories, %d labels; default %s: FA %s, no path %s",
        variant,
        round_,
        seed,
        total,
        table.num_rows,
        metrics["default"],
        d.get("mean_fa_ratio_correct"),
        d.get("no_path_share"),
    )
    return metrics
