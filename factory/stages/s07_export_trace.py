"""Stage export-trace: a round's correct trajectories as TRACE SFT targets and RL prompts."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from factory import paths
from factory.bootstrap.rounds import skip_reason
from factory.config import Params
from factory.errors import FactoryError
from factory.io import outputs_together, write_json, write_jsonl
from factory.retrieval.store import PassageStore
from factory.stages import chain_arguments
from factory.trace.export import PROTOCOL_VERSION, TraceExport, export_stats, export_trace
from schemas import TRAJECTORY, columns_except, read_round_input, read_rows, write_parquet

OUTCOME_COLUMNS = ["trajectory_id", "question_id", "policy", "correct"]
TRAJECTORY_COLUMNS = columns_except(TRAJECTORY, "steps", ["messages"])

COMMAND = "export-trace"
HELP = (
    "export a round's correct trajectories in the TRACE protocol (SFT targets + RL prompts with "
    "reward references)"
)
log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    chain_arguments(parser, "round whose trajectories are exported (0 = from the base model)")


def variant_seed(params: Params, seed: int) -> int:
    """The seed the variants stage gives kept_units (its param seed + 1000 x protocol seed)."""
    return params.variants.seed + 1000 * seed


def write_outputs(result: TraceExport, stats: dict, out_dir: Path, metrics_path: Path) -> None:
    """sft/rl as parquet (contracts TRACE_SFT/TRACE_RL) and JSONL, stats.json, and the stage metrics."""
    write_parquet(result.sft, out_dir / "sft.parquet", "trace_sft")
    write_parquet(result.rl, out_dir / "rl.parquet", "trace_rl")
    write_jsonl(
        out_dir / "sft.jsonl", ({"messages": r["messages"]} for r in result.sft)
    )  # chat fine-tuning format
    write_jsonl(out_dir / "rl.jsonl", result.rl)  # prompt + reward reference columns
    write_json(out_dir / "stats.json", stats)
    write_json(metrics_path, stats)


def _skip_reason(variant: str, round_: int, seed: int) -> str | None:
    try:
        return skip_reason(variant, round_, seed)
    except FactoryError:  # no decision recorded: the round simply produced nothing
        return None


@outputs_together()
def run(params: Params, variant: str, round_: int, seed: int = 0) -> None:
    if round_ < 0:
        raise FactoryError(f"--round {round_}: rounds start at 0")
    out_dir = paths.trace_dir(variant, round_, seed)
    metrics_path = paths.stage_metrics("trace", variant, round_, seed)
    head = {
        "variant": variant,
        "round": round_,
        "seed": seed,
        "protocol": PROTOCOL_VERSION,
        "mode": params.backtrace.mode,
        "target_mode": params.backtrace.target_mode,
        "max_passages": params.trace.max_passages,
        "passage_chars": params.agent.passage_chars,
        "bonus_weight": params.trace.bonus_weight,
        "variant_seed": variant_seed(params, seed),
    }
    traj_path, labels_path = paths.trajectories(variant, round_, seed), paths.labels(variant, round_, seed)
    # The correct trajectories whole (without their prompts: the TRACE prompt is built anew); the others
    # only as far as their status needs.
    outcomes = read_round_input(traj_path, "trajectories", variant, round_, seed, columns=OUTCOME_COLUMNS)
    if not outcomes:  # a skipped round (stop decision) or a round that produced nothing
        reason = _skip_reason(variant, round_, seed)
        status = "skipped" if reason else "empty"
        stats = {
            **head,
            "status": status,
            "reason": reason or "the round's trajectory file is empty",
            **export_stats(TraceExport(), 0),
        }
        write_outputs(TraceExport(), stats, out_dir, metrics_path)
        log.info(
            "export-trace %s round %d (seed %d): %s (%s)", variant, round_, seed, status, stats["reason"]
        )
        return
    for path, stage in ((labels_path, "backtrace"), (paths.QUESTIONS, "ingest"), (paths.INDEX_DIR, "index")):
        if not Path(path).exists():
            raise FactoryError(
                f"{path} is missing: run `factory {stage}` first (variant {variant}, round {round_}, "
                f"seed {seed})"
            )
    correct = [t["trajectory_id"] for t in outcomes if t["correct"]]
    trajectories = [t for t in outcomes if not t["correct"]]
    trajectories += read_rows(traj_path, TRAJECTORY_COLUMNS, where={"trajectory_id": correct})
    where = {
        "trajectory_id": correct,
        "mode": [params.backtrace.mode],
        "target_mode": [params.backtrace.target_mode],
    }
    labels = read_rows(labels_path, where=where)
    questions = {
        q["question_id"]: q
        for q in read_rows(
            paths.QUESTIONS,
            columns=["question_id", "answers", "supporting"],
            where={"question_id": sorted({t["question_id"] for t in outcomes})},
        )
    }
    wanted = sorted({pid for t in trajectories for s in t.get("steps") or [] for pid in s["retrieved"]})
    passages = PassageStore.open(paths.INDEX_DIR).get_many(wanted)
    result = export_trace(
        trajectories,
        labels,
        questions,
        passages,
        params.trace,
        variant=variant,
        round_=round_,
        seed=seed,
        variant_seed=variant_seed(params, seed),
        mode=params.backtrace.mode,
        target_mode=params.backtrace.target_mode,
        passage_chars=params.agent.passage_chars,
    )
    stats = export_stats(result, len(outcomes))
    status = "ok" if result.sft or result.rl else "empty"
    write_outputs(result, {**head, "status": status, **stats}, out_dir, metrics_path)
    overall = stats["sft_rewards"]["overall"]
    log.info(
        "export-trace %s round %d: %d trajectories, %d SFT / %d RL records; SFT targets earn format %s, "
        "accuracy %s, relevance %s",
        variant,
        round_,
        len(outcomes),
        len(result.sft),
        len(result.rl),
        *(None if overall[c] is None else round(overall[c], 3) for c in ("format", "accuracy", "relevance")),
    )
