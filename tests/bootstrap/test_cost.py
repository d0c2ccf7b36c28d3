"""LLM calls of a protocol from its params: hand-computed numbers, and the per-trajectory bound met
exactly by a worst-case policy (never sufficient, every reply repaired once)."""

from __future__ import annotations

import itertools

from factory.agent.format import render_complete, render_explore, render_final
from factory.bootstrap.cost import (
    calls_per_trajectory,
    counterfactual_calls_per_trajectory,
    protocol_cost,
    render_cost,
)
from factory.cli import main
from factory.config import Params
from factory.retrieval.bm25 import BM25Retriever
from tests.agent.test_loop import FakeLLM, run


def test_protocol_cost_by_hand():
    p = Params()  # L=5, P=3, A=1; N=24, k=1; H=16; R=2; 3 variants x 1 seed; 10 routes x 3 datasets
    assert calls_per_trajectory(p) == (5 * (1 + 3) + 1) * (1 + 1) == 42
    # counterfactual: M=200 re-asked at most, 5 conditions + 2 more random seeds = 7 graphs, repaired once
    assert counterfactual_calls_per_trajectory(p) == 7 * 2 == 14
    cost = protocol_cost(p)
    assert cost["counterfactual_per_round"] == min(24, 200) * 14 == 336
    assert cost["per_round"] == (24 * 1 + 16) * 42 + 336 == 2016
    assert cost["per_chain"] == 2 * 2016 + 16 * 42 == 4704
    assert cost["total"] == 3 * 4704 + 16 * 42 + 10 * 3 == 14814
    narrow = Params(counterfactual={"conditions": ["full", "without_sq"], "max_trajectories": 5})
    assert protocol_cost(narrow)["counterfactual_per_round"] == 5 * 2 * 2
    full = Params(
        trajectories={"n_questions": 1000, "samples": 4, "rationalize": True},
        evaluate={"n_questions": 500},
        bootstrap={
            "seeds": [0, 1, 2],
            "max_rounds": 3,
            "rounds": [{"round": r, "after": a} for r, a in enumerate(["init", "round_0", "round_1"])],
        },
    )
    cost = protocol_cost(full)
    assert cost["trajectories_per_round"] == 1000 * 4 + 1000 and cost["chains"] == 9
    assert cost["per_round"] == (5000 + 500) * 42 + 200 * 14
    text = render_cost(full)
    line = "per round       (N k + N + H) c + counterfactual = (1000 x 4 + 1000 + 500) x 42 + 2,800 = 233,800"
    assert line in text
    assert f"= {cost['total']:,}" in text


def test_params_cost_command(capsys):
    assert main(["params", "--cost", "--set", "agent.repair_attempts=0"]) == 0
    out = capsys.readouterr().out
    assert "per trajectory  c = (L(1 + P) + 1)(1 + A) = (" in out and "(1 + 0) = " in out


def test_the_per_trajectory_bound_is_met_by_a_worst_case_policy(ingested):
    questions = [q for q in ingested.questions if q["split"] == "train"][:2]
    passages = {
        p["pid"]: {**p, "dataset": q["dataset"], "text": " ".join(p["sentences"])}
        for q in questions
        for p in q["passages"]
    }
    retriever = BM25Retriever.build(list(passages.values()))
    fresh = itertools.count()

    def reply(kind, request):
        if len(request.messages) <= 2:  # first attempt: unreadable, so every call is repaired once
            return "???"
        if kind == "explore":
            return render_explore("need more", [(f"entity {next(fresh)}", "relation") for _ in range(2)])
        if kind == "complete":
            n = next(fresh)
            return render_complete([(f"subject {n}", "relation", f"object {n}")])
        return render_final("done", "an answer")

    params = Params(agent={"max_iterations": 3, "max_pairs": 2, "repair_attempts": 1})
    records = run(questions, FakeLLM(reply), retriever, params)
    assert calls_per_trajectory(params) == (3 * (1 + 2) + 1) * 2 == 20
    assert [r["llm_calls"] for r in records] == [20, 20]
