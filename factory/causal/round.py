"""A round of the causal check as the counterfactual stage runs it: its plan, built once from params
and the round (conditions, random seeds, decoding, the trajectories re-asked), S_q of the re-asked
trajectories, and the round's metrics (LLM calls, tokens, the effects and verdicts of
``factory.causal.effects``) and log lines."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from factory.agent.policy import Policy
from factory.backtrace.rows import labels_index
from factory.causal.effects import causal_summary
from factory.causal.reask import rows_per_trajectory, select_trajectories
from factory.causal.rows import CounterfactualPlan, Plan, RoundResult
from factory.params.config import Params
from factory.params.vocab import CONDITIONS
from factory.utils.seeds import derived_seed, seed_series

NO_CORRECT = "no correct trajectory in this round"
log = logging.getLogger(__name__)


def plan_head(params: Params, protocol_seed: int) -> dict:
    """What the round re-asks under: the labels' mode x target mode, the conditions (in canonical
    order) and the seeds of the random-removal control (``counterfactual.seed`` of the chain + k)."""
    cp, bp = params.counterfactual, params.backtrace
    control_seed = derived_seed(cp.seed, protocol_seed)
    return {
        "mode": bp.mode,
        "target_mode": bp.target_mode,
        "conditions": [c for c in CONDITIONS if c in cp.conditions],
        "random_seeds": seed_series(control_seed, cp.random_seeds),
    }


def round_plan(
    params: Params, head: Mapping, policy: Policy, constrained: bool, outcomes: Sequence[Mapping]
) -> CounterfactualPlan:
    """The plan of the round whose metrics start with ``head`` (variant, round, protocol_seed and
    ``plan_head``) and whose trajectories' outcomes (id, dataset, correct) are ``outcomes``: its
    correct trajectories, or a sample of ``counterfactual.max_trajectories`` seeded by the chain and
    the round; ``constrained``: the policy's backend decodes the final step's grammar."""
    cp = params.counterfactual
    rows = Plan(
        variant=head["variant"],
        round=head["round"],
        protocol_seed=head["protocol_seed"],
        policy=policy.name,
        mode=head["mode"],
        target_mode=head["target_mode"],
        conditions=tuple(head["conditions"]),
        random_seeds=tuple(head["random_seeds"]),
        max_new_tokens=params.llm.max_new_tokens,
        repair_attempts=params.agent.repair_attempts,
        sampling_seed=cp.seed,
        constrained_pairs=params.agent.max_pairs if constrained else None,
    )
    sample_seed = derived_seed(cp.seed, head["protocol_seed"], head["round"])
    chosen = select_trajectories(outcomes, cp.max_trajectories, sample_seed)
    return CounterfactualPlan(
        head=dict(head),
        rows=rows,
        chosen=tuple(t["trajectory_id"] for t in chosen),
        correct=sum(1 for t in outcomes if t.get("correct")),
        shard_size=cp.shard_size,
        policy=policy,
        params=params,
    )


def sq_by_trajectory(labels: Iterable[Mapping], mode: str, target_mode: str) -> dict[str, list[str]]:
    """S_q (kept triplet ids) by trajectory id, from the labels rows of ``mode`` x ``target_mode``."""
    by_tid = labels_index(labels, mode, target_mode)
    return {tid: list(row["kept_triplet_ids"]) for tid, row in by_tid.items()}


def planned_calls(plan: CounterfactualPlan) -> int:
    """First-attempt LLM calls of the round (its progress says it)."""
    return len(plan.chosen) * rows_per_trajectory(plan.rows.conditions, len(plan.rows.random_seeds))


def round_metrics(
    plan: CounterfactualPlan,
    outcomes: Sequence[Mapping],
    result: RoundResult,
    model: str,
    cache: Mapping[str, int],
) -> dict:
    """The round's metrics: the plan's head, the trajectories re-asked, what they cost (LLM calls and
    tokens) and the causal summary of its rows (accuracy per condition, effects with CIs, verdicts)."""
    rows, params = result.rows, plan.params
    summary = causal_summary(rows, list(plan.rows.conditions), params.relevance, params.counterfactual)
    metrics = {
        **plan.head,
        "status": "ok" if rows else "empty",
        "policy": plan.policy.name,
        "model": model,
        "trajectories": len(outcomes),
        "correct": result.correct,
        "reasked": result.selected,
        "llm_calls": {
            # conditions x re-asked trajectories x random seeds: one first-attempt call per row
            "planned": len(rows),
            "per_trajectory": rows_per_trajectory(plan.rows.conditions, len(plan.rows.random_seeds)),
            "with_repairs": sum(r["attempts"] for r in rows),
            "sent_this_run": result.calls_sent,  # identical prompts of a shard go once; resumed: the rest
            "cache": dict(cache),
        },
        "tokens": {
            "prompt": sum(r["prompt_tokens"] for r in rows),
            "completion": sum(r["completion_tokens"] for r in rows),
        },
        **summary,
    }
    if not rows:
        metrics["reason"] = NO_CORRECT
    return metrics


def log_round(label: str, metrics: Mapping) -> None:
    """What the round re-asked and sent, then one line per verdict."""
    calls = metrics["llm_calls"]
    log.info(
        "%s: %d of %d correct trajectories re-asked, %d calls planned, %d sent (cache %d hits / %d misses)",
        label,
        metrics["reasked"],
        metrics["correct"],
        calls["planned"],
        calls["sent_this_run"],
        calls["cache"]["hits"],
        calls["cache"]["misses"],
    )
    for v in metrics["verdicts"].values():
        log.info("%s", v["line"])
