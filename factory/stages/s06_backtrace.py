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
labelling (``factory.backtrace.round``) runs in tasks (``factory.backtrace.tasks``) on
``execution.engine``: in this process, or as Ray tasks on a cluster; the sorted output is the same
bytes either way.
"""

from __future__ import annotations

import importlib
import logging
import threading

from factory.backtrace.round import label_round
from factory.execution.engine import preflight
from factory.params.config import Params
from factory.stages import chain_arguments
from factory.stages.round import Round, empty_parquet
from factory.utils import paths
from factory.utils.io import outputs_together
from schemas import num_rows, write_parquet

COMMAND = "backtrace"
HELP = "label a round's trajectories by knowledge backtracing (every mode x target mode), with FA ratios"
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    chain_arguments(parser, "bootstrapping round whose trajectories are labelled")


@outputs_together()
def run(params: Params, variant: str, round_: int, seed: int = 0) -> dict:
    from validators import run_suites
    from validators.labels import labels_suite

    preflight(params)  # a Ray cluster that cannot be reached fails here, before any work
    bp = params.backtrace
    rnd = Round(COMMAND, variant, round_, seed)
    total = num_rows(rnd.require(rnd.trajectories, "trajectories"))
    head = rnd.head("protocol_seed", modes=list(bp.modes), target_modes=list(bp.target_modes))
    if not total:
        empty = empty_parquet(rnd.labels, "labels")
        return rnd.skip(head, rnd.empty_reason(), empty, trajectories=0, labels=0)
    # Great Expectations takes seconds to import: done beside the labelling (on Ray this process
    # only waits), not after it
    gx = threading.Thread(target=importlib.import_module, args=("great_expectations",), daemon=True)
    gx.start()
    labelled = label_round(params, rnd.trajectories, total)
    gx.join()
    gate = run_suites(
        f"backtrace-{variant}-seed_{seed}-round_{round_}",
        labels_suite(labelled.frame, labelled.trajectories, bp.modes, bp.target_modes),
        docs_dir=paths.GX_DOCS,
    )
    write_parquet(labelled.table, rnd.labels, "labels")
    metrics = rnd.write_metrics({**head, **labelled.metrics(params, total, gate.evaluated)})
    d = metrics["by_mode"].get(metrics["default"], {}).get("all", {})
    log.info(
        "backtrace %s round %d (seed %d): %d trajectories, %d labels; default %s: FA %s, no path %s",
        variant,
        round_,
        seed,
        total,
        metrics["labels"],
        metrics["default"],
        d.get("mean_fa_ratio_correct"),
        d.get("no_path_share"),
    )
    return metrics
