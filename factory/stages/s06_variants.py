"""Stage variants: a round's supervision set for one variant (backtrace | random | unfiltered).

Reads the round's trajectories and backtrace labels (the params.backtrace.mode x target_mode rows),
builds the examples (factory.variants.sets; with params.variants.exclude_parametric, the trajectories the
counterfactual stage flagged parametric are left out of every variant alike, counted in stats.json),
accumulates rounds 0..R-1 when params.variants.accumulate,
gates the set (validators.supervision: unique ids, random matched to backtrace per trajectory, no
held-out/test question by id or normalised text) and writes data/supervision/<V>/seed_<S>/round_<R>/
train.parquet + train.jsonl (OpenAI chat fine-tuning format) + stats.json, and
metrics/variants/<V>/seed_<S>/round_<R>.json. A skipped round (empty trajectory file) gives an empty
set with status ``skipped``; a round without a correct trajectory gives status ``empty``. Only the
correct trajectories are read whole, a row group at a time, and the set is written as it is built.
"""

from __future__ import annotations

import logging
from collections import Counter

from factory import paths
from factory.agent.policy import assert_trainable
from factory.bootstrap.rounds import skip_reason
from factory.causal.effects import parametric_exclusion
from factory.config import Params
from factory.errors import FactoryError
from factory.io import atomic_path, jsonl_line, outputs_together, write_json, write_jsonl
from factory.stages import chain_arguments
from factory.variants.kept import labels_index
from factory.variants.sets import SetBuilder, check_new_ids, earlier_examples
from schemas import ParquetStream, iter_batches, read_round_input, read_rows, write_parquet

OUTCOME_COLUMNS = ["trajectory_id", "policy", "correct"]  # of every trajectory: counts, policies, exclusions

COMMAND = "variants"
HELP = (
    "build a round's supervision set of a variant (backtrace | random | unfiltered): parquet, OpenAI "
    "JSONL, stats, leakage gate"
)
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    chain_arguments(parser, "bootstrapping round (0..max_rounds-1; round 0: the base model's trajectories)")


def _write_empty(out_dir, stats: dict, metrics_path) -> None:
    write_parquet([], out_dir / "train.parquet", "supervision")
    write_jsonl(out_dir / "train.jsonl", [])
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


@outputs_together()
def run(params: Params, variant: str, round_: int, seed: int = 0) -> dict:
    import pandas as pd

    from validators import run_suites
    from validators.supervision import QuestionSplits, leakage_frame, matching_frame, supervision_suites

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
    outcomes = read_round_input(traj_path, "trajectories", variant, round_, seed, columns=OUTCOME_COLUMNS)
    if not outcomes:
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
        _write_empty(out_dir, stats, metrics_path)
        log.info("variants %s round %d (seed %d): skipped: %s", variant, round_, seed, stats["reason"])
        return stats

    assert_trainable(outcomes)
    labels_path = paths.labels(variant, round_, seed)
    where = {"mode": [mode], "target_mode": [target_mode]}
    by_tid = labels_index(
        read_round_input(labels_path, "backtrace", variant, round_, seed, where=where), mode, target_mode
    )
    exclude, parametric = set(), {"exclude_parametric": False}
    if params.variants.exclude_parametric:
        exclude, parametric = _parametric(outcomes, variant, round_, seed)
    builder = SetBuilder(variant, round_, control_seed, by_tid, mode, target_mode, exclude)
    splits = QuestionSplits(read_rows(paths.QUESTIONS, columns=["question_id", "split", "question_norm"]))
    example_frames, matching_frames, seen = [], [], set()
    rounds = list(range(round_)) if params.variants.accumulate else []
    # The set is written as it is built (earlier rounds' examples first, then this round's, a row group
    # of trajectories at a time) and published only once its gate has passed.
    with (
        atomic_path(out_dir / "train.jsonl") as jsonl_tmp,
        open(jsonl_tmp, "w", encoding="utf-8") as jsonl,
        ParquetStream(out_dir / "train.parquet", "supervision") as table,
    ):

        def emit(examples: list[dict]) -> None:
            table.write_rows(examples)
            jsonl.writelines(jsonl_line({"messages": e["messages"]}) for e in examples)
            example_frames.append(leakage_frame(examples, splits))

        if params.variants.accumulate:
            for _, batch in earlier_examples(variant, round_, seed):
                seen.update(e["example_id"] for e in batch)
                emit(batch)
        for batch in iter_batches(traj_path, where={"correct": [True]}):
            trajectories = batch.to_pylist()
            examples = builder.add(trajectories)
            check_new_ids(examples, seen, variant, round_)
            emit(examples)
            matching_frames.append(matching_frame(trajectories, by_tid, control_seed))
        matching_frames.append(matching_frame([], by_tid, control_seed))  # the columns, with no batch
        gate = run_suites(
            f"variants-{variant}-seed_{seed}-round_{round_}",
            supervision_suites(
                pd.concat([leakage_frame([], splits), *example_frames], ignore_index=True),
                pd.concat(matching_frames, ignore_index=True),
            ),
            docs_dir=paths.GX_DOCS,
        )
    built = builder.stats(len(outcomes), Counter(t["policy"] for t in outcomes))
    status = "ok" if table.rows else "empty"
    stats = {
        **head,
        **built,
        "parametric": parametric,
        "status": status,
        "examples_in_set": table.rows,
        "accumulated_rounds": rounds + [round_],
        "expectations_passed": gate.evaluated,
    }
    if not built["correct"]:
        stats["reason"] = "no correct trajectory in this round"
    write_json(out_dir / "stats.json", stats)
    write_json(metrics_path, stats)
    log.info(
        "variants %s round %d (seed %d): %d correct of %d trajectories -> %d examples (%d in the set, "
        "rounds %s); units kept %d/%d; FA %.3f",
        variant,
        round_,
        seed,
        built["correct"],
        len(outcomes),
        built["examples"],
        table.rows,
        stats["accumulated_rounds"],
        built["units"]["kept"],
        built["units"]["total"],
        built["fa_ratio"],
    )
    return stats
