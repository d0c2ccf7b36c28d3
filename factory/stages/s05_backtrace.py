"""Stage backtrace: label every trajectory of a round under every mode x target mode (docs/design.md §2).

Reads data/trajectories/<V>/seed_<S>/round_<R>.parquet, writes data/labels/<V>/seed_<S>/round_<R>.parquet
(``schemas.LABELS``, one row per trajectory x mode x target mode, sorted) and
metrics/backtrace/<V>/seed_<S>/round_<R>.json: per mode x target mode the mean FA ratio over correct
trajectories, the share with no path found, mean kept triplets and admin-dropped triplets, overall,
by dataset and by route. Token counts use the policy's tokenizer (``llm.model``, else
``model.dir``, loaded offline); without one, whitespace tokens, recorded as such. With
``backtrace.answer_passage`` the sentences of the grounding passages come from the passage store
(data/index/passages; missing: the rule is off, said in the metrics). The trajectories are read a
row group at a time, without their prompts. A skipped round (empty trajectory file) writes an empty
labels file and status ``skipped``. Gated by ``validators.labels`` (Great Expectations). The
labelling runs in tasks (``factory.backtrace.tasks``) on ``execution.engine``: in this process, or
as Ray tasks on a cluster; the sorted output is the same bytes either way.
"""

from __future__ import annotations

import importlib
import logging
import threading

import pyarrow as pa

from factory import paths
from factory.backtrace.options import load_token_counter
from factory.backtrace.summary import LabelSummary
from factory.backtrace.tasks import LabelTasks, passage_store, plan_tasks
from factory.bootstrap.rounds import skip_reason
from factory.config import Params
from factory.errors import FactoryError
from factory.execution.engine import make_engine, preflight
from factory.io import outputs_together, progress, write_json
from factory.stages import chain_arguments
from schemas import num_rows, require, write_parquet

COMMAND = "backtrace"
HELP = "label a round's trajectories by knowledge backtracing (every mode x target mode), with FA ratios"
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    chain_arguments(parser, "bootstrapping round whose trajectories are labelled")


@outputs_together()
def run(params: Params, variant: str, round_: int, seed: int = 0) -> dict:
    import pandas as pd

    from validators import run_suites
    from validators.labels import labels_suite

    preflight(params)  # a Ray cluster that cannot be reached fails here, before any work
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
    # Tasks of at most a row group's slice; their labels go to Arrow (compact), their gate columns
    # to a frame; on Ray each worker loads its own counter and store.
    # Great Expectations takes seconds to import: done beside the labelling (on Ray this process
    # only waits), not after it
    gx = threading.Thread(target=importlib.import_module, args=("great_expectations",), daemon=True)
    gx.start()
    tasks = plan_tasks(src)
    results: list = [None] * len(tasks)
    with make_engine(params) as engine, progress(total=total, desc="backtrace", unit="traj") as bar:
        work = LabelTasks(params, str(src))
        if not engine.remote:
            work.counter, work.store = counter, store
        for k, result in engine.map(work, list(enumerate(tasks)), bar.update):
            results[k] = result
            if engine.remote:
                bar.update(len(result.trajectory_ids))
    trajectories = len({tid for r in results for tid in r.trajectory_ids})
    correct = sum(r.correct for r in results)
    summary = LabelSummary({})
    for r in results:
        summary.merge(r.summary)
    table = pa.concat_tables([r.labels for r in results]).sort_by(
        [("trajectory_id", "ascending"), ("mode", "ascending"), ("target_mode", "ascending")]
    )
    gx.join()
    gate = run_suites(
        f"backtrace-{variant}-seed_{seed}-round_{round_}",
        labels_suite(
            pd.concat([r.frame for r in results], ignore_index=True), trajectories, bp.modes, bp.target_modes
        ),
        docs_dir=paths.GX_DOCS,
    )
    write_parquet(table, out, "labels")
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
