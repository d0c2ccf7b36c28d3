"""Stage counterfactual: the causal check of a round's backtrace labels (docs/design.md §4, the review's
falsifier).

Reads data/trajectories/<V>/seed_<S>/round_<R>.parquet and its labels (the params.backtrace.mode x
target_mode rows: S_q), re-asks the forced-final prompt of every correct trajectory (or a seeded sample
of ``counterfactual.max_trajectories``) with the policy that generated the round, greedy, under the
``counterfactual.conditions`` (factory.causal.reask), and writes
data/counterfactual/<V>/seed_<S>/round_<R>.parquet (``schemas.COUNTERFACTUAL``) and
metrics/counterfactual/<V>/seed_<S>/round_<R>.json: the LLM calls it cost, accuracy per condition,
the effects with bootstrap CIs and one verdict line per dataset (factory.causal.effects).
Checkpointed per shard: a killed run resumes and writes the same file. A skipped round (empty
trajectory file) writes an empty file and status ``skipped``.
"""

from __future__ import annotations

import logging

from factory import paths
from factory.agent.loop import constrained_decoding
from factory.agent.setup import make_policy_llm
from factory.bootstrap.rounds import policy_for, skip_reason
from factory.causal.effects import causal_summary
from factory.causal.reask import (
    Plan,
    counterfactual_round,
    rows_per_trajectory,
    select_trajectories,
)
from factory.config import CONDITIONS, Params
from factory.errors import FactoryError
from factory.execution.engine import preflight
from factory.execution.sampling import derived_seed
from factory.io import outputs_together, write_json
from factory.stages import chain_arguments
from factory.variants.kept import labels_index
from schemas import read_round_input, read_rows, write_parquet

OUTCOME_COLUMNS = ["trajectory_id", "dataset", "correct"]  # what choosing the re-asked ones needs
TRAJECTORY_COLUMNS = [  # what re-asking one needs
    "trajectory_id",
    "question_id",
    "dataset",
    "qtype",
    "route",
    "prompt_version",
    "question",
    "answers",
    "correct",
    "triplets",
]

COMMAND = "counterfactual"
HELP = (
    "re-ask a round's correct trajectories without S_q, with S_q only, without a random set of its size "
    "and closed-book: is S_q load-bearing, which answers are parametric"
)
log = logging.getLogger(__name__)


def add_arguments(parser) -> None:
    chain_arguments(parser, "bootstrapping round whose trajectories are re-asked")


def _skip_reason(variant: str, round_: int, seed: int) -> str:
    try:
        reason = skip_reason(variant, round_, seed)
    except FactoryError:  # no decision recorded: the trajectories stage simply produced nothing
        reason = None
    return reason or "the round's trajectory file is empty"


@outputs_together()
def run(params: Params, variant: str, round_: int, seed: int = 0) -> dict:
    preflight(params)  # a Ray cluster that cannot be reached fails here, before any work
    cp, bp = params.counterfactual, params.backtrace
    src, labels_path = paths.trajectories(variant, round_, seed), paths.labels(variant, round_, seed)
    out = paths.counterfactual(variant, round_, seed)
    metrics_path = paths.stage_metrics("counterfactual", variant, round_, seed)
    control_seed = derived_seed(cp.seed, seed)
    conditions = tuple(c for c in CONDITIONS if c in cp.conditions)
    head = {
        "variant": variant,
        "round": round_,
        "protocol_seed": seed,
        "mode": bp.mode,
        "target_mode": bp.target_mode,
        "conditions": list(conditions),
        "random_seeds": [control_seed + k for k in range(cp.random_seeds)],
    }
    # Only the re-asked trajectories are read whole (without their steps), and only their labels.
    outcomes = read_round_input(src, "trajectories", variant, round_, seed, columns=OUTCOME_COLUMNS)
    if not outcomes:
        metrics = {
            **head,
            "status": "skipped",
            "reason": _skip_reason(variant, round_, seed),
            "trajectories": 0,
        }
        write_parquet([], out, "counterfactual")
        write_json(metrics_path, metrics)
        log.info(
            "counterfactual %s round %d (seed %d): skipped: %s", variant, round_, seed, metrics["reason"]
        )
        return metrics
    sample_seed = derived_seed(cp.seed, seed, round_)
    chosen = [t["trajectory_id"] for t in select_trajectories(outcomes, cp.max_trajectories, sample_seed)]
    trajectories = read_rows(src, TRAJECTORY_COLUMNS, where={"trajectory_id": chosen})
    labels = read_round_input(
        labels_path,
        "backtrace",
        variant,
        round_,
        seed,
        columns=["trajectory_id", "mode", "target_mode", "kept_triplet_ids"],
        where={"trajectory_id": chosen, "mode": [bp.mode], "target_mode": [bp.target_mode]},
    )
    by_tid = labels_index(labels, bp.mode, bp.target_mode)
    sq = {tid: list(row["kept_triplet_ids"]) for tid, row in by_tid.items()}
    policy = policy_for(variant, round_, seed)
    llm = make_policy_llm(params, policy)
    try:
        plan = Plan(
            variant=variant,
            round=round_,
            protocol_seed=seed,
            policy=policy.name,
            mode=bp.mode,
            target_mode=bp.target_mode,
            conditions=conditions,
            random_seeds=tuple(head["random_seeds"]),
            max_new_tokens=params.llm.max_new_tokens,
            repair_attempts=params.agent.repair_attempts,
            sampling_seed=cp.seed,
            constrained_pairs=params.agent.max_pairs if constrained_decoding(params, llm) else None,
        )
        correct = sum(1 for t in outcomes if t["correct"])
        planned = min(correct, cp.max_trajectories) * rows_per_trajectory(conditions, cp.random_seeds)
        result = counterfactual_round(
            trajectories,
            sq,
            llm=llm,
            plan=plan,
            max_trajectories=cp.max_trajectories,
            sample_seed=sample_seed,
            shard_size=cp.shard_size,
            out_path=out,
            desc=f"counterfactual {variant} r{round_} ({planned} calls)",
            correct=correct,
            params=params,
            policy=policy,
        )
        cache = {"hits": int(getattr(llm, "hits", 0)), "misses": int(getattr(llm, "misses", 0))}
        identity = llm.identity
    finally:
        llm.close()
    rows = result.rows
    summary = causal_summary(
        rows,
        conditions,
        bootstrap_samples=params.relevance.bootstrap_samples,
        seed=params.relevance.seed,
        margin=cp.margin,
        min_trajectories=cp.min_trajectories,
    )
    metrics = {
        **head,
        "status": "ok" if rows else "empty",
        "policy": policy.name,
        "model": identity,
        "trajectories": len(outcomes),
        "correct": result.correct,
        "reasked": result.selected,
        "llm_calls": {
            # conditions x re-asked trajectories x random seeds: one first-attempt call per row
            "planned": len(rows),
            "per_trajectory": rows_per_trajectory(conditions, cp.random_seeds),
            "with_repairs": sum(r["attempts"] for r in rows),
            "sent_this_run": result.calls_sent,  # identical prompts of a shard go once; resumed: the rest
            "cache": cache,
        },
        "tokens": {
            "prompt": sum(r["prompt_tokens"] for r in rows),
            "completion": sum(r["completion_tokens"] for r in rows),
        },
        **summary,
    }
    if not rows:
        metrics["reason"] = "no correct trajectory in this round"
    write_json(metrics_path, metrics)
    log.info(
        "counterfactual %s round %d (seed %d, policy %s): %d of %d correct trajectories re-asked, %d calls "
        "planned, %d sent (cache %d hits / %d misses)",
        variant,
        round_,
        seed,
        policy.name,
        result.selected,
        result.correct,
        len(rows),
        result.calls_sent,
        cache["hits"],
        cache["misses"],
    )
    for v in summary["verdicts"].values():
        log.info("%s", v["line"])
    return metrics
