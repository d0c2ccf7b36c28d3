"""A round of the causal check as the counterfactual stage runs it: its plan (conditions, random
seeds, decoding), S_q of the re-asked trajectories, and the round's metrics (LLM calls, tokens, the
effects and verdicts of ``factory.causal.effects``) and log lines."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

from factory.agent.policy import Policy
from factory.backtrace.rows import labels_index
from factory.causal.effects import causal_summary
from factory.causal.reask import Plan, RoundResult, rows_per_trajectory
from factory.params.config import Params
from factory.params.vocab import CONDITIONS
from factory.utils.seeds import derived_seed

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
        "random_seeds": [control_seed + k for k in range(cp.random_seeds)],
    }


def round_plan(params: Params, head: Mapping, policy: Policy, constrained: bool) -> Plan:
    """The plan of the round whose metrics start with ``head`` (variant, round, protocol_seed and
    ``plan_head``); ``constrained``: the policy's backend decodes the final step's grammar."""
    return Plan(
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
        sampling_seed=params.counterfactual.seed,
        constrained_pairs=params.agent.max_pairs if constrained else None,
    )


def kept_sets(labels: Iterable[Mapping], mode: str, target_mode: str) -> dict[str, list[str]]:
    """S_q (kept triplet ids) by trajectory id, from the labels rows of ``mode`` x ``target_mode``."""
    by_tid = labels_index(labels, mode, target_mode)
    return {tid: list(row["kept_triplet_ids"]) for tid, row in by_tid.items()}


def planned_calls(params: Params, correct: int) -> int:
    """First-attempt LLM calls of a round with ``correct`` correct trajectories (its progress says it)."""
    cp = params.counterfactual
    conditions = [c for c in CONDITIONS if c in cp.conditions]
    return min(correct, cp.max_trajectories) * rows_per_trajectory(conditions, cp.random_seeds)


def round_metrics(
    head: Mapping,
    params: Params,
    outcomes: Sequence[Mapping],
    result: RoundResult,
    policy: Policy,
    model: str,
    cache: Mapping[str, int],
) -> dict:
    """The round's metrics: ``head``, the trajectories re-asked, what they cost (LLM calls and tokens)
    and the causal summary of its rows (accuracy per condition, effects with CIs, verdicts)."""
    rows = result.rows
    summary = causal_summary(rows, head["conditions"], params.relevance, params.counterfactual)
    metrics = {
        **head,
        "status": "ok" if rows else "empty",
        "policy": policy.name,
        "model": model,
        "trajectories": len(outcomes),
        "correct": result.correct,
        "reasked": result.selected,
        "llm_calls": {
            # conditions x re-asked trajectories x random seeds: one first-attempt call per row
            "planned": len(rows),
            "per_trajectory": rows_per_trajectory(head["conditions"], params.counterfactual.random_seeds),
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
