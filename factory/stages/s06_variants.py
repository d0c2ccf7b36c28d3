"""Stage variants: a round's supervision set for one variant (backtrace | random | unfiltered).

Reads the round's trajectories and backtrace labels (the params.backtrace.mode x target_mode rows),
builds the examples (factory.variants; with params.variants.exclude_parametric, the trajectories the
counterfactual stage flagged parametric are left out of every variant alike, counted in stats.json),
accumulates rounds 0..R-1 when params.variants.accumulate,
gates the set (validators.supervision: unique ids, random matched to backtrace per trajectory, no
held-out/test question by id or normalised text) and writes data/supervision/<V>/seed_<S>/round_<R>/
train.parquet + train.jsonl (OpenAI chat fine-tuning format) + stats.json, and
metrics/variants/<V>/seed_<S>/round_<R>.json. A skipped round (empty trajectory file) gives an empty
set with status ``skipped``; a round without a correct trajectory gives status ``empty``.
"""

from __future__ import annotations

import logging

from factory import paths
from factory.bootstrap.rounds import skip_reason
from factory.config import Params
from factory.errors import FactoryError
from factory.io import write_json, write_jsonl
from factory.relevance.causal import parametric_exclusion
from factory.stages import chain_arguments
from factory.variants import accumulated, build_set, labels_index
from schemas import read_round_input, read_rows, write_parquet

COMMAND = "variants"
HELP = (
           "build a round's supervision set of a variant (backtrace | random | unfiltered): parquet, OpenAI "
           "JSONL, stats, leakage gate"
       )
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    chain_arguments(parser, "bootstrapping round (0..max_rounds-1; round 0: the base model's trajectories)")


def _write(out_dir, examples: list[dict], stats: dict, metrics_path) -> None:
    write_parquet(examples, out_dir / "train.parquet", "supervision")
    write_jsonl(out_dir / "train.jsonl", [{"messages": e["messages"]} for e in examples])
    write_json(out_dir / "stats.json", stats)
    write_json(metrics_path, stats)


def _why_empty(variant: str, round_: int, seed: int) -> str:
    try:
        reason = skip_reason(variant, round_, seed)
    except FactoryError:  # no decision recorded: the trajectories stage simply produced nothing
        reason = None
    return reason or "the round's trajectory file is empty"


def _parametric(trajectories: list[dict], variant: str, round_: int, seed: int) -> tuple[set[str], dict]:
    """Parametric trajectories of the round (the counterfactual stage's closed-book answers), to leave out."""
    path = paths.counterfactual(variant, round_, seed)
    if not path.exists():
        raise FactoryError(
            f"{path} is missing: variants.exclude_parametric needs `factory counterfactual --variant "
            f"{variant} --round {round_} --seed {seed}` first"
        )
    exclude, counts = parametric_exclusion(trajectories, read_rows(path))
    if counts["unknown_kept"]:
        log.warning(
            "variants %s round %d: %d correct trajectories were not re-asked closed-book (counterfactual."
            "max_trajectories or conditions): kept, parametric or not",
            variant,
            round_,
            counts["unknown_kept"],
        )
    return exclude, {"exclude_parametric": True, "source": str(path), **counts}


def run(params: Params, variant: str, round_: int, seed: int = 0) -> dict:
    from validators import run_suites
    from validators.supervision import supervision_specs

    out_dir = paths.supervision_dir(variant, round_, seed)
    metrics_path = paths.stage_metrics("variants", variant, round_, seed)
    control_seed = params.variants.seed + 1000 * seed  # derived seed of this chain
    mode, target_mode = params.backtrace.mode, params.backtrace.target_mode
    head = {
        "variant": variant,
        "round": round_,
        "protocol_seed": seed,
        "seed": control_seed,
        "mode": mode,
        "target_mode": target_mode,
    }

    traj_path = paths.trajectories(variant, round_, seed)
    trajectories = read_round_input(traj_path, "trajectories", variant, round_, seed)
    if not trajectories:
        stats = {
            **head,
            "status": "skipped",
            "reason": _why_empty(variant, round_, seed),
            "trajectories": 0,
            "correct": 0,
            "examples": 0,
            "examples_in_set": 0,
            "accumulated_rounds": [],
        }
        _write(out_dir, [], stats, metrics_path)
        log.info("variants %s round %d (seed %d): skipped: %s", variant, round_, seed, stats["reason"])
        return stats

    labels_path = paths.labels(variant, round_, seed)
    labels = read_round_input(labels_path, "backtrace", variant, round_, seed)
    exclude, parametric = set(), {"exclude_parametric": False}
    if params.variants.exclude_parametric:
        exclude, parametric = _parametric(trajectories, variant, round_, seed)
    built = build_set(trajectories, labels, variant, round_, control_seed, mode, target_mode, exclude)
    examples, rounds = built.examples, [round_]
    if params.variants.accumulate:
        examples, rounds = accumulated(built.examples, variant, round_, seed)

    questions = read_rows(paths.QUESTIONS, columns=["question_id", "split", "question_norm"])
    specs = supervision_specs(
        examples, questions, trajectories, labels_index(labels, mode, target_mode), control_seed
    )
    gate = run_suites(f"variants-{variant}-seed_{seed}-round_{round_}", specs, docs_dir=paths.GX_DOCS)

    status = "ok" if examples else "empty"
    stats = {
        **head,
        **built.stats,
        "parametric": parametric,
        "status": status,
        "examples_in_set": len(examples),
        "accumulated_rounds": rounds,
        "expectations_passed": gate.evaluated,
    }
    if not built.stats["correct"]:
        stats["reason"] = "no correct trajectory in this round"
    _write(out_dir, examples, stats, metrics_path)
    log.info(
        "variants %s round %d (seed %d): %d correct of %d trajectories -> %d examples (%d in the set, "
        "rounds %s); units kept %d/%d; FA %.3f",
        variant,
        round_,
        seed,
        built.stats["correct"],
        len(trajectories),
        len(built.examples),
        len(examples),
        rounds,
        built.stats["units"]["kept"],
        built.stats["units"]["total"],
        built.stats["fa_ratio"],
    )
    return stats
