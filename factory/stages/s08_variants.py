"""Stage variants: a round's supervision set for one variant (factory/variants/registry.py).

Reads the round's trajectories and backtrace labels (the params.backtrace.mode x target_mode rows),
builds the examples (factory.variants.sets; with params.variants.exclude_parametric, the trajectories the
counterfactual stage flagged parametric are left out of every variant alike, counted in stats.json),
accumulates rounds 0..R-1 when params.variants.accumulate,
gates the set (validators.supervision: unique ids, each matched control matched to its reference per
trajectory, no held-out/test question by id or normalised text) and writes
data/supervision/<V>/seed_<S>/round_<R>/ train.parquet + train.jsonl (OpenAI chat fine-tuning format) +
kept.parquet (what the variant kept of each trajectory; the TRACE export reads it) + stats.json, and
metrics/variants/<V>/seed_<S>/round_<R>.json. A skipped round (empty trajectory file) gives an empty
set with status ``skipped``; a round without a correct trajectory gives status ``empty``. Only the
correct trajectories are read whole, a row group at a time, and the set is written as it is built.
"""

from __future__ import annotations

from functools import partial

from factory.agent.policy import assert_trainable
from factory.backtrace.rows import labels_index
from factory.params.config import Params
from factory.stages import chain_arguments
from factory.stages.round import Round
from factory.utils import paths
from factory.utils.io import outputs_together, write_json
from factory.utils.seeds import derived_seed
from factory.variants.round import (
    EMPTY_SET_COUNTS,
    SetFiles,
    log_set,
    parametric_left_out,
    set_batches,
    set_stats,
    write_empty_set,
    write_selections,
)
from factory.variants.sets import SetBuilder
from schemas import read_rows

OUTCOME_COLUMNS = ["trajectory_id", "policy", "correct"]  # of every trajectory: counts, policies, exclusions

COMMAND = "variants"
HELP = (
    "build a round's supervision set of a variant (one of factory/variants/registry.py): parquet, "
    "OpenAI JSONL, what it kept, stats, leakage gate"
)


def add_arguments(parser) -> None:
    chain_arguments(parser, "bootstrapping round (0..max_rounds-1; round 0: the base model's trajectories)")


@outputs_together()
def run(params: Params, variant: str, round_: int, seed: int = 0) -> dict:
    import pandas as pd

    from validators import run_suites
    from validators.supervision import QuestionSplits, leakage_frame, matching_frame, supervision_suites

    rnd, vp = Round(COMMAND, variant, round_, seed), params.variants
    control_seed = derived_seed(vp.seed, seed)
    mode, target_mode = params.backtrace.mode, params.backtrace.target_mode
    head = rnd.head("protocol_seed", seed=control_seed, mode=mode, target_mode=target_mode)
    outcomes = rnd.read(rnd.trajectories, "trajectories", columns=OUTCOME_COLUMNS)
    if not outcomes:
        empty = partial(write_empty_set, rnd.supervision_dir, variant)
        return rnd.skip(head, rnd.empty_reason(), empty, **EMPTY_SET_COUNTS)
    assert_trainable(outcomes)
    where = {"mode": [mode], "target_mode": [target_mode]}
    by_tid = labels_index(rnd.read(rnd.labels, "backtrace", where=where), mode, target_mode)
    exclude, left_out = set(), {"exclude_parametric": False}
    if vp.exclude_parametric:
        exclude, left_out = parametric_left_out(
            outcomes, rnd.counterfactual, f"factory counterfactual {rnd.args}"
        )
    builder = SetBuilder(variant, round_, control_seed, by_tid, mode, target_mode, exclude)
    splits = QuestionSplits(read_rows(paths.QUESTIONS, columns=["question_id", "split", "question_norm"]))
    leakage, matching = [leakage_frame([], splits)], []
    # Published only once its gate has passed, with the stage's other outputs.
    with SetFiles(rnd.supervision_dir) as files:
        for examples, trajectories in set_batches(
            builder, rnd.trajectories, accumulate=vp.accumulate, protocol_seed=seed
        ):
            files.add(examples)
            leakage.append(leakage_frame(examples, splits))
            if trajectories is not None:
                matching.append(matching_frame(trajectories, by_tid, control_seed))
        matching.append(matching_frame([], by_tid, control_seed))  # the columns, with no batch
        gate = run_suites(
            f"variants-{variant}-seed_{seed}-round_{round_}",
            supervision_suites(pd.concat(leakage, ignore_index=True), pd.concat(matching, ignore_index=True)),
            docs_dir=paths.GX_DOCS,
        )
    write_selections(rnd.supervision_dir, variant, builder.kept)
    rounds = (list(range(round_)) if vp.accumulate else []) + [round_]
    stats = set_stats(head, builder, outcomes, left_out, files.rows, rounds, gate.evaluated)
    write_json(rnd.supervision_dir / "stats.json", stats)
    log_set(f"variants {variant} round {round_} (seed {seed})", rnd.write_metrics(stats))
    return stats
