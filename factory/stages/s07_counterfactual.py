"""Stage counterfactual: the causal check of a round's backtrace labels (docs/design.md §4, the review's
falsifier).

Reads data/trajectories/<V>/seed_<S>/round_<R>.parquet and its labels (the params.backtrace.mode x
target_mode rows: S_q), re-asks the forced-final prompt of every correct trajectory (or a seeded sample
of ``counterfactual.max_trajectories``) with the policy that generated the round, greedy, under the
``counterfactual.conditions`` (factory.causal.reask), and writes
data/counterfactual/<V>/seed_<S>/round_<R>.parquet (``schemas.COUNTERFACTUAL``) and
metrics/counterfactual/<V>/seed_<S>/round_<R>.json: the LLM calls it cost, accuracy per condition,
the effects with bootstrap CIs and one verdict line per dataset (factory.causal.effects, through
factory.causal.round).
Checkpointed per shard: a killed run resumes and writes the same file. A skipped round (empty
trajectory file) writes an empty file and status ``skipped``.
"""

from __future__ import annotations

from factory.agent.loop import constrained_decoding
from factory.agent.setup import make_policy_llm
from factory.bootstrap.rounds import policy_for
from factory.causal.round import (
    log_round,
    plan_head,
    planned_calls,
    round_metrics,
    round_plan,
    sq_by_trajectory,
)
from factory.causal.rows import CounterfactualPlan, counterfactual_round
from factory.execution.engine import preflight
from factory.llm.base import cache_use
from factory.params.config import Params
from factory.stages import chain_arguments
from factory.stages.round import Round, empty_parquet
from factory.utils.io import outputs_together
from schemas import read_rows

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
LABEL_COLUMNS = ["trajectory_id", "mode", "target_mode", "kept_triplet_ids"]  # S_q

COMMAND = "counterfactual"
HELP = (
    "re-ask a round's correct trajectories without S_q, with S_q only, without a random set of its size "
    "and closed-book: is S_q load-bearing, which answers are parametric"
)


def add_arguments(parser) -> None:
    chain_arguments(parser, "bootstrapping round whose trajectories are re-asked")


@outputs_together()
def run(params: Params, variant: str, round_: int, seed: int = 0) -> dict:
    preflight(params)  # a Ray cluster that cannot be reached fails here, before any work
    rnd = Round(COMMAND, variant, round_, seed)
    head = rnd.head("protocol_seed", **plan_head(params, seed))
    outcomes = rnd.read(rnd.trajectories, "trajectories", columns=OUTCOME_COLUMNS)
    if not outcomes:
        empty = empty_parquet(rnd.counterfactual, "counterfactual")
        return rnd.skip(head, rnd.empty_reason(), empty, trajectories=0)
    rnd.require(rnd.labels, "backtrace")  # missing labels say so before the policy's backend is built
    policy = policy_for(variant, round_, seed)
    llm = make_policy_llm(params, policy)
    try:
        plan = round_plan(params, head, policy, constrained_decoding(params, llm), outcomes)
        trajectories, sq = reasked_inputs(rnd, plan)
        desc = f"counterfactual {variant} r{round_} ({planned_calls(plan)} calls)"
        result = counterfactual_round(trajectories, sq, plan, llm=llm, out_path=rnd.counterfactual, desc=desc)
        cache, model = cache_use(llm), llm.identity
    finally:
        llm.close()
    metrics = rnd.write_metrics(round_metrics(plan, outcomes, result, model, cache))
    log_round(f"counterfactual {variant} round {round_} (seed {seed}, policy {policy.name})", metrics)
    return metrics


def reasked_inputs(rnd: Round, plan: CounterfactualPlan) -> tuple[list[dict], dict[str, list[str]]]:
    """The plan's chosen trajectories, read whole (without their steps), and their S_q: only these
    rows of the round's trajectories and labels are read."""
    chosen = list(plan.chosen)
    trajectories = read_rows(rnd.trajectories, TRAJECTORY_COLUMNS, where={"trajectory_id": chosen})
    mode, target_mode = plan.rows.mode, plan.rows.target_mode
    where = {"trajectory_id": chosen, "mode": [mode], "target_mode": [target_mode]}
    labels = rnd.read(rnd.labels, "backtrace", columns=LABEL_COLUMNS, where=where)
    return trajectories, sq_by_trajectory(labels, mode, target_mode)
