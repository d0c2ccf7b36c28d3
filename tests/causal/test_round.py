"""A round of the causal check as the counterfactual stage plans and reports it (factory/causal/round.py):
the seeds of its random control per protocol seed, its plan, S_q per trajectory, the calls it will cost
and the metrics and log lines of its rows."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from factory.agent.policy import Policy
from factory.causal.reask import Reply, condition_graphs
from factory.causal.round import (
    NO_CORRECT,
    log_round,
    plan_head,
    planned_calls,
    round_metrics,
    round_plan,
    sq_by_trajectory,
)
from factory.causal.rows import RoundResult, trajectory_rows
from factory.params.config import Params
from factory.params.vocab import CONDITIONS
from factory.utils.errors import FactoryError
from tests.causal.test_reask import key_trajectories
from tests.variants.test_sets import make_labels

POLICY = Policy("backtrace-r0", Path("models/backtrace/seed_0/round_0/adapter"), 0)


def head_of(params: Params, protocol_seed: int = 0, variant: str = "backtrace", round_: int = 1) -> dict:
    """The head the stage starts a round's metrics with (``Round.head("protocol_seed", ...)``)."""
    return {
        "variant": variant,
        "round": round_,
        "protocol_seed": protocol_seed,
        **plan_head(params, protocol_seed),
    }


def outcomes_of(correct: int, datasets=("hotpotqa",)) -> list[dict]:
    """Outcome rows of a round with ``correct`` correct trajectories (and one wrong one)."""
    rows = [
        {"trajectory_id": f"t{k}", "dataset": datasets[k % len(datasets)], "correct": True}
        for k in range(correct)
    ]
    return rows + [{"trajectory_id": "wrong", "dataset": datasets[0], "correct": False}]


def plan_of(params: Params, correct: int = 4, constrained: bool = False, **head):
    return round_plan(params, head_of(params, **head), POLICY, constrained, outcomes_of(correct))


def test_plan_head_derives_the_random_seeds_from_the_protocol_seed():
    params = Params()
    chain0, chain1 = plan_head(params, 0), plan_head(params, 1)
    assert chain0 == {
        "mode": "undirected_shortest",
        "target_mode": "thought_and_answer",
        "conditions": list(CONDITIONS),
        "random_seeds": [41, 42, 43],  # counterfactual.seed + k
    }
    assert chain1["random_seeds"] == [1041, 1042, 1043]  # + 1000 x the protocol seed
    assert {k: v for k, v in chain1.items() if k != "random_seeds"} == {
        k: v for k, v in chain0.items() if k != "random_seeds"
    }
    assert not set(chain0["random_seeds"]) & set(plan_head(params, 2)["random_seeds"])


def test_plan_head_follows_the_params():
    params = Params(
        backtrace={"mode": "directed_reach", "target_mode": "answer_only"},
        counterfactual={"conditions": ["closed_book", "without_sq", "full"], "random_seeds": 4, "seed": 7},
    )
    head = plan_head(params, 0)
    assert (head["mode"], head["target_mode"]) == ("directed_reach", "answer_only")
    assert head["conditions"] == ["full", "without_sq", "closed_book"]  # canonical order, not the params'
    assert head["random_seeds"] == [7, 8, 9, 10]


@pytest.mark.parametrize("constrained", [True, False])
def test_round_plan_carries_the_head_the_policy_and_the_decoding(constrained):
    params = Params(llm={"max_new_tokens": 64}, agent={"repair_attempts": 2, "max_pairs": 2})
    plan = plan_of(params, constrained=constrained, protocol_seed=1).rows
    assert (plan.variant, plan.round, plan.protocol_seed, plan.policy) == ("backtrace", 1, 1, "backtrace-r0")
    assert (plan.mode, plan.target_mode) == ("undirected_shortest", "thought_and_answer")
    assert plan.conditions == tuple(CONDITIONS) and plan.random_seeds == (1041, 1042, 1043)
    assert (plan.max_new_tokens, plan.repair_attempts, plan.sampling_seed) == (64, 2, 41)
    assert plan.constrained_pairs == (2 if constrained else None)


def test_sq_by_trajectory_takes_the_rows_of_the_mode_and_target_mode():
    trajectories, sq, _ = key_trajectories()
    first, second = trajectories[0], trajectories[1]
    tid1, tid2 = first["trajectory_id"], second["trajectory_id"]
    labels = [
        make_labels(first, sq[tid1]),
        make_labels(first, [f"{tid1}#t5"], "directed_reach"),
        make_labels(first, [f"{tid1}#t4"], target_mode="answer_only"),
        make_labels(second, sq[tid2]),
        make_labels(second, [], "directed_reach"),
    ]
    assert sq_by_trajectory(labels, "undirected_shortest", "thought_and_answer") == {
        tid1: sq[tid1],
        tid2: sq[tid2],
    }
    assert sq_by_trajectory(labels, "directed_reach", "thought_and_answer") == {
        tid1: [f"{tid1}#t5"],
        tid2: [],
    }
    assert sq_by_trajectory(labels, "undirected_shortest", "answer_only") == {tid1: [f"{tid1}#t4"]}
    assert sq_by_trajectory(labels, "undirected_simple", "thought_and_answer") == {}
    with pytest.raises(FactoryError, match="two rows for trajectory"):
        sq_by_trajectory(labels + [make_labels(second, [])], "undirected_shortest", "thought_and_answer")


def test_planned_calls_count_conditions_seeds_and_the_sample():
    params = Params()  # 5 conditions, 3 random seeds: 4 + 3 calls per trajectory
    assert planned_calls(plan_of(params, 4)) == 4 * 7
    assert planned_calls(plan_of(params, 0)) == 0
    assert (
        planned_calls(plan_of(Params(counterfactual={"max_trajectories": 2}), 5)) == 2 * 7
    )  # the sample's size
    narrow = Params(counterfactual={"conditions": ["full", "without_sq"], "random_seeds": 5})
    assert planned_calls(plan_of(narrow, 3)) == 3 * 2  # no without_random: the random seeds cost nothing
    random_only = Params(counterfactual={"conditions": ["without_random"], "random_seeds": 5})
    assert planned_calls(plan_of(random_only, 3)) == 3 * 5


def reasked_rows(params: Params, plan) -> tuple[list[dict], int]:
    """Rows of the round's correct trajectories: every condition answered right except without_sq, and
    closed-book right only for the first (parametric); the first reply needed a repair. Returns the
    rows and the number of trajectories re-asked."""
    trajectories, sq, _ = key_trajectories()
    correct = [t for t in trajectories if t["correct"]]
    rows = []
    for k, t in enumerate(correct):
        shown = condition_graphs(t, sq[t["trajectory_id"]], plan.rows.conditions, plan.rows.random_seeds)
        replies = []
        for s in shown:
            right = s.condition != "without_sq" and (s.condition != "closed_book" or k == 0)
            answer = t["answers"][0] if right else "unknown"
            replies.append(Reply("ok", f"Answer: {answer}", answer, None, 1, 100, 10))
        if k == 0:
            replies[0].attempts = 2
        rows += trajectory_rows(t, sq[t["trajectory_id"]], shown, replies, plan.rows, "mock-model")
    return rows, len(correct)


def test_round_metrics_count_calls_tokens_and_summarize_the_rows():
    params = Params(relevance={"bootstrap_samples": 20})
    head = head_of(params)
    outcomes = [{"trajectory_id": t["trajectory_id"], "correct": t["correct"]} for t in key_trajectories()[0]]
    plan = round_plan(params, head, POLICY, False, outcomes)
    rows, reasked = reasked_rows(params, plan)
    cache = {"hits": 3, "misses": 25}
    result = RoundResult(rows, selected=reasked, correct=reasked, calls_sent=25)
    m = round_metrics(plan, outcomes, result, "mock-model", cache)
    assert {k: m[k] for k in head} == head
    assert (m["status"], m["policy"], m["model"]) == ("ok", "backtrace-r0", "mock-model")
    assert (m["trajectories"], m["correct"], m["reasked"]) == (5, 4, 4) and "reason" not in m
    assert m["llm_calls"] == {
        "planned": 4 * 7,
        "per_trajectory": 7,
        "with_repairs": 4 * 7 + 1,
        "sent_this_run": 25,
        "cache": cache,
    }
    assert m["llm_calls"]["planned"] == len(rows) == planned_calls(plan)
    assert m["llm_calls"]["cache"] is not cache  # a copy: the backend's counter may go on
    assert m["tokens"] == {"prompt": 28 * 100, "completion": 28 * 10}
    acc = m["groups"]["all"]["accuracy"]
    assert (acc["full"]["value"], acc["without_sq"]["value"], acc["closed_book"]["value"]) == (1.0, 0.0, 0.25)
    assert m["counts"]["parametric"] == 1 and set(m["verdicts"]) >= {"all", "hotpotqa"}


def test_a_round_without_rows_is_empty_with_a_reason():
    params = Params(relevance={"bootstrap_samples": 20})
    head = head_of(params)
    outcomes = [{"trajectory_id": "a", "correct": False}]
    plan = round_plan(params, head, POLICY, False, outcomes)
    result = RoundResult([], selected=0, correct=0, calls_sent=0)
    m = round_metrics(plan, outcomes, result, "mock-model", {"hits": 0, "misses": 0})
    assert (m["status"], m["reason"], m["trajectories"], m["reasked"]) == ("empty", NO_CORRECT, 1, 0)
    assert m["llm_calls"]["planned"] == m["llm_calls"]["with_repairs"] == 0
    assert m["tokens"] == {"prompt": 0, "completion": 0}


def test_log_round_says_the_cost_then_one_line_per_verdict(caplog):
    params = Params(relevance={"bootstrap_samples": 20})
    outcomes = [{"trajectory_id": t["trajectory_id"]} for t in key_trajectories()[0]]
    plan = round_plan(params, head_of(params), POLICY, False, outcomes)
    rows, reasked = reasked_rows(params, plan)
    result = RoundResult(rows, selected=reasked, correct=reasked, calls_sent=20)
    m = round_metrics(plan, outcomes, result, "m", {"hits": 8, "misses": 20})
    caplog.set_level(logging.INFO, logger="factory.causal.round")
    log_round("counterfactual backtrace round 1", m)
    lines = [r.getMessage() for r in caplog.records if r.name == "factory.causal.round"]
    assert lines[0] == (
        "counterfactual backtrace round 1: 4 of 4 correct trajectories re-asked, 28 calls planned, 20 sent "
        "(cache 8 hits / 20 misses)"
    )
    assert lines[1:] == [v["line"] for v in m["verdicts"].values()] and len(lines) > 1
