"""Stage export-trace: a round's correct trajectories as TRACE SFT targets and RL prompts."""

from __future__ import annotations

import argparse
from functools import partial

from factory.params.config import Params
from factory.stages import chain_arguments
from factory.stages.round import EMPTY_TRAJECTORIES, SKIPPED, Round
from factory.trace.export import PROTOCOL_VERSION, TraceExport, export_stats, export_trace
from factory.trace.round import log_export, read_inputs, write_export
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.io import outputs_together

OUTCOME_COLUMNS = ["trajectory_id", "question_id", "policy", "correct"]

COMMAND = "export-trace"
HELP = (
    "export a round's correct trajectories in the TRACE protocol (SFT targets + RL prompts with "
    "reward references)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    chain_arguments(parser, "round whose trajectories are exported (0 = from the base model)")


@outputs_together()
def run(params: Params, variant: str, round_: int, seed: int = 0) -> None:
    if round_ < 0:
        raise FactoryError(f"--round {round_}: rounds start at 0")
    metrics_path = paths.stage_metrics("trace", variant, round_, seed)
    rnd = Round(COMMAND, variant, round_, seed, metrics_path=metrics_path)
    bp, tp = params.backtrace, params.trace
    head = rnd.head(
        protocol=PROTOCOL_VERSION,
        mode=bp.mode,
        target_mode=bp.target_mode,
        max_passages=tp.max_passages,
        passage_chars=params.agent.passage_chars,
        bonus_weight=tp.bonus_weight,
    )
    outcomes = rnd.read(rnd.trajectories, "trajectories", columns=OUTCOME_COLUMNS)
    if not outcomes:  # a skipped round (stop decision) or a round that produced nothing
        reason, nothing = rnd.recorded_stop(), TraceExport()
        write = partial(write_export, rnd.trace_dir, nothing)
        status = SKIPPED if reason else "empty"
        rnd.skip(head, reason or EMPTY_TRAJECTORIES, write, status=status, **export_stats(nothing, 0))
        return
    inputs = read_inputs(
        outcomes,
        rnd.trajectories,
        rnd.labels,
        rnd.supervision_dir / paths.KEPT,
        bp.mode,
        bp.target_mode,
        f"variant {variant}, round {round_}, seed {seed}",
    )
    result = export_trace(
        inputs.trajectories,
        inputs.labels,
        inputs.kept,
        inputs.questions,
        inputs.passages,
        tp,
        variant=variant,
        round_=round_,
        seed=seed,
        mode=bp.mode,
        target_mode=bp.target_mode,
        passage_chars=params.agent.passage_chars,
    )
    status = "ok" if result.sft or result.rl else "empty"
    stats = rnd.write_metrics({**head, "status": status, **export_stats(result, len(outcomes))})
    write_export(rnd.trace_dir, result, stats)
    log_export(f"export-trace {variant} round {round_}", result, stats)
