"""Counterfactual re-asking against a policy whose answer depends only on what the graph shows.

The mock OpenAI server answers a forced-final prompt with the object of the question's *key triplet*
when that triplet is in the prompt's graph, and "unknown" otherwise (a question it "knows" it answers
from any graph, the empty one included). So every condition's outcome is known in advance.
``key_script`` / ``key_trajectories`` are shared with the stage tests.
"""

from __future__ import annotations

import pytest

from factory.agent.format import render_final, render_triplet
from factory.agent.policy import Policy
from factory.agent.prompts import final_messages
from factory.causal.effects import causal_summary
from factory.causal.reask import (
    condition_graphs,
    random_removal,
    reask,
    select_trajectories,
)
from factory.causal.rows import CounterfactualPlan, Plan, counterfactual_round
from factory.llm.base import ChatResponse
from factory.llm.openai_backend import OpenAILLM
from factory.params.config import Params
from factory.params.label_sections import CounterfactualParams, RelevanceParams
from factory.params.vocab import CONDITIONS
from factory.utils.errors import FactoryError
from tests.mock_openai_server import MockOpenAIServer, openai_llm
from tests.variants.test_sets import make_trajectory

SEEDS = (41, 42, 43)
SUMMARY_PARAMS = (RelevanceParams(bootstrap_samples=50, seed=1), CounterfactualParams(min_trajectories=1))


def key_script(keys: dict[str, tuple[str, str, str]], knows: frozenset[str] = frozenset(), garbled=()):
    """Mock policy: the key triplet's object when its line is in the graph, else 'unknown'.

    ``knows``: questions answered from any graph (parametric); ``garbled``: questions whose first reply
    is unreadable (a repair prompt follows)."""

    def script(messages: list[dict], model: str) -> str:
        user = messages[1]["content"]  # a repair prompt keeps the original prompt first
        question = user.split("\n", 1)[0].removeprefix("Question: ")
        if question in garbled and len(messages) == 2:
            return "I am not sure what to say"
        key = keys.get(question)
        graph = user.split("Graph:\n", 1)[1].split("\n")
        if key is not None and (question in knows or render_triplet(*key) in graph):
            return render_final("The graph says so.", key[2])
        return render_final("The graph does not say.", "unknown")

    return script


# Default graph of make_trajectory: t1 (Scott Derrickson ; nationality ; American), t2 (... born in Denver),
# t3 (Ed Wood ; nationality ; American), t4 (Denver ; capital of ; Colorado), t5 (Denver ; nickname ; ...).
def key_trajectories() -> tuple[list[dict], dict[str, list[str]], dict[str, tuple[str, str, str]]]:
    """Trajectories, S_q per trajectory and the key triplet per question, with known outcomes:

    - q_in: key t1 inside S_q {t1, t3}; q_out: key t5 outside S_q {t1, t2}; q_known: parametric;
    - q_empty: S_q empty (no path found); q_wrong: an incorrect trajectory (never re-asked)."""
    spec = {
        "q_in": ("hotpotqa", 1, [1, 3]),
        "q_out": ("2wikimultihopqa", 5, [1, 2]),
        "q_known": ("musique", 4, [2, 4]),
        "q_empty": ("hotpotqa", 2, []),
        "q_wrong": ("hotpotqa", 1, [1]),
    }
    trajectories, sq, keys = [], {}, {}
    for name, (dataset, key, kept) in spec.items():
        tid = f"backtrace/seed_0/round_0/{dataset}/{name}/k0"
        probe = make_trajectory(tid, f"{dataset}/{name}")
        key_t = probe["triplets"][key - 1]
        triple = (key_t["subject"], key_t["relation"], key_t["object"])
        question = f"What is the answer to {name}?"
        t = make_trajectory(
            tid,
            f"{dataset}/{name}",
            question=question,
            answer=triple[2] if name != "q_wrong" else "nobody",
            answers=(triple[2],),
            correct=name != "q_wrong",
            dataset=dataset,
            round_=0,
        )
        trajectories.append(t)
        sq[tid] = [f"{tid}#t{k}" for k in kept]
        keys[question] = triple
    return trajectories, sq, keys


def plan(conditions=CONDITIONS, **kw) -> Plan:
    values = dict(
        variant="backtrace",
        round=0,
        protocol_seed=0,
        policy="base",
        mode="undirected_shortest",
        target_mode="thought_and_answer",
        conditions=tuple(conditions),
        random_seeds=SEEDS,
        max_new_tokens=32,
        repair_attempts=1,
        sampling_seed=41,
    )
    values.update(kw)
    return Plan(**values)


def run_round(trajectories, sq, llm, out_path, *, plan_=None, shard_size=8):
    """``counterfactual_round`` with this file's sample: up to 10 trajectories, sample seed 1."""
    chosen = select_trajectories(trajectories, 10, 1)
    rows = plan_ or plan()
    round_plan = CounterfactualPlan(
        head={},
        rows=rows,
        chosen=tuple(t["trajectory_id"] for t in chosen),
        correct=sum(1 for t in trajectories if t["correct"]),
        shard_size=shard_size,
        policy=Policy(rows.policy, None, -1),
        params=Params(),
    )
    return counterfactual_round(trajectories, sq, round_plan, llm=llm, out_path=out_path)


def _llm(server, tmp_path) -> OpenAILLM:
    return openai_llm([server.base_url], tmp_path, backoff_s=0.01)


def test_every_condition_gets_the_outcome_the_graph_decides(tmp_path):
    trajectories, sq, keys = key_trajectories()
    with MockOpenAIServer(
        script=key_script(keys, knows=frozenset({"What is the answer to q_known?"}))
    ) as server:
        llm = _llm(server, tmp_path)
        result = run_round(trajectories, sq, llm, tmp_path / "cf.parquet", shard_size=2)
        llm.close()
    rows = result.rows
    assert (result.selected, result.correct) == (4, 4)  # q_wrong is not re-asked
    assert len(rows) == 4 * (4 + len(SEEDS))
    by = {(r["question_id"].split("/")[1], r["condition"], r["random_seed"]): r for r in rows}
    expected = {  # (full, without_sq, only_sq, closed_book)
        "q_in": (True, False, True, False),
        "q_out": (True, True, False, False),
        "q_known": (True, True, True, True),
        "q_empty": (True, True, False, False),
    }
    for name, outcome in expected.items():
        got = tuple(by[(name, c, None)]["correct"] for c in ("full", "without_sq", "only_sq", "closed_book"))
        assert got == outcome, name
        assert {r["parametric"] for r in rows if r["question_id"].endswith(name)} == {name == "q_known"}
    tid_in = next(t["trajectory_id"] for t in trajectories if t["question_id"].endswith("q_in"))
    key_of = {"q_in": 1, "q_out": 5, "q_known": 4, "q_empty": 2}
    for r in rows:
        assert r["status"] == "ok" and r["attempts"] == 1 and r["model"] == llm.identity
        if r["condition"] == "without_random":
            name = r["question_id"].split("/")[1]
            key_id = f"{r['trajectory_id']}#t{key_of[name]}"
            assert r["correct"] == (key_id in r["shown_triplet_ids"] or name == "q_known")
            assert r["graph_size"] - len(r["shown_triplet_ids"]) == r["sq_size"]  # matched in size
    # the draws are recorded and reproducible
    draws = [r for r in rows if r["trajectory_id"] == tid_in and r["condition"] == "without_random"]
    assert [r["random_seed"] for r in draws] == list(SEEDS)
    g = [f"{tid_in}#t{k}" for k in range(1, 6)]
    for r in draws:
        assert set(g) - set(r["shown_triplet_ids"]) == random_removal(g, 2, r["random_seed"], tid_in)
    # identical prompts go once (q_empty: without_sq and without_random show all of G, only_sq shows nothing)
    distinct = {(r["trajectory_id"], tuple(r["shown_triplet_ids"])) for r in rows}
    assert server.state.completions == result.calls_sent == len(distinct) < len(rows)


def test_matched_random_control_removes_exactly_sq_size(tmp_path):
    t = make_trajectory("x/k0", "hotpotqa/x")
    g = [x["triplet_id"] for x in t["triplets"]]
    for size in range(len(g) + 1):
        shown = condition_graphs(t, g[:size], CONDITIONS, list(range(20)))
        by = {}
        for s in shown:
            by.setdefault(s.condition, []).append(s)
        assert [s.triplet_ids for s in by["full"]] == [tuple(g)]
        assert by["without_sq"][0].triplet_ids == tuple(g[size:]) and by["only_sq"][0].triplet_ids == tuple(
            g[:size]
        )
        assert by["closed_book"][0].triplet_ids == ()
        assert len(by["without_random"]) == 20
        for s in by["without_random"]:
            assert len(s.triplet_ids) == len(g) - size and list(s.triplet_ids) == [
                x for x in g if x in s.triplet_ids
            ]
        if 0 < size < len(g):  # 20 seeds do not all draw the same set
            assert len({s.triplet_ids for s in by["without_random"]}) > 1
    assert condition_graphs(t, g[:2], CONDITIONS, [3]) == condition_graphs(t, g[:2], CONDITIONS, [3])
    with pytest.raises(FactoryError, match="kept_triplet_ids"):
        condition_graphs(t, ["elsewhere#t1"], CONDITIONS, [3])


def test_narrower_conditions_cost_fewer_calls_and_say_what_is_missing(tmp_path):
    trajectories, sq, keys = key_trajectories()
    with MockOpenAIServer(script=key_script(keys)) as server:
        llm = _llm(server, tmp_path)
        result = run_round(
            trajectories, sq, llm, tmp_path / "cf.parquet", plan_=plan(("closed_book", "full"))
        )
        llm.close()
        assert server.state.completions == 8
    assert [r["condition"] for r in result.rows[:2]] == ["full", "closed_book"]  # canonical order
    summary = causal_summary(result.rows, ["full", "closed_book"], *SUMMARY_PARAMS)
    line = summary["verdicts"]["all"]["line"]
    assert "necessity not computed (without_sq, without_random not run)" in line
    assert "sufficiency not computed (only_sq not run)" in line and "closed book answers 0%" in line


def test_unreadable_reply_is_repaired_and_failures_are_recorded(tmp_path):
    trajectories, sq, keys = key_trajectories()
    garbled = {"What is the answer to q_in?"}
    with MockOpenAIServer(script=key_script(keys, garbled=garbled)) as server:
        llm = _llm(server, tmp_path)
        rows = run_round(trajectories[:1], sq, llm, tmp_path / "a.parquet", plan_=plan(("full",))).rows
        assert rows[0]["attempts"] == 2 and rows[0]["correct"] and rows[0]["status"] == "ok"
        no_repair = plan(("full",), repair_attempts=0)
        rows = run_round(trajectories[:1], sq, llm, tmp_path / "b.parquet", plan_=no_repair).rows
        llm.close()
    assert rows[0]["status"] == "parse_error" and not rows[0]["correct"] and rows[0]["answer"] is None


class Failing:
    backend, identity = "fake", "fake:1"

    def generate(self, requests):
        return [ChatResponse("", error="connection refused", finish_reason="error") for _ in requests]


def test_llm_errors_are_rows_with_a_status_and_left_out_of_the_effects(tmp_path):
    trajectories, sq, _ = key_trajectories()
    replies, sent = reask(
        Failing(),
        [("knowtrace-v1", final_messages("knowtrace-v1", "Q?", []))] * 3,
        max_new_tokens=8,
        seed=0,
        repair_attempts=1,
    )
    assert sent == 1 and all(
        r.status == "llm_error" and r.attempts == 1 for r in replies
    )  # one distinct prompt
    rows = run_round(trajectories, sq, Failing(), tmp_path / "cf.parquet").rows
    assert {r["status"] for r in rows} == {"llm_error"} and all(r["parametric"] is None for r in rows)
    summary = causal_summary(
        rows, CONDITIONS, RelevanceParams(bootstrap_samples=20, seed=1), SUMMARY_PARAMS[1]
    )
    assert summary["counts"] == {
        "trajectories": 4,
        "llm_error_excluded": 4,
        "evaluated": 0,
        "parametric": 0,
        "parametric_unknown": 0,
    }


def test_unknown_prompt_version_and_missing_labels_fail_clearly(tmp_path):
    trajectories, sq, _ = key_trajectories()
    with pytest.raises(FactoryError, match="no backtrace labels"):
        run_round(trajectories, {}, Failing(), tmp_path / "cf.parquet")
    odd = [{**trajectories[0], "prompt_version": "simulated-v1"}]
    with pytest.raises(FactoryError, match="simulated-v1"):
        run_round(odd, sq, Failing(), tmp_path / "cf.parquet")


def test_sample_is_seeded_and_even_across_datasets():
    trajectories = [
        make_trajectory(f"r/{d}/q{i}/k0", f"{d}/q{i}", dataset=d, correct=i != 0)
        for d in ("hotpotqa", "2wikimultihopqa", "musique")
        for i in range(6)
    ]
    chosen = select_trajectories(trajectories, 6, seed=3)
    assert len(chosen) == 6 and all(t["correct"] for t in chosen)
    assert sorted(t["dataset"] for t in chosen) == sorted(["hotpotqa", "2wikimultihopqa", "musique"] * 2)
    assert chosen == select_trajectories(trajectories, 6, seed=3)
    assert chosen != select_trajectories(trajectories, 6, seed=4)
    order = [t["trajectory_id"] for t in trajectories]
    assert [t["trajectory_id"] for t in chosen] == sorted(
        (t["trajectory_id"] for t in chosen), key=order.index
    )
    assert len(select_trajectories(trajectories, 100, seed=3)) == 15


class Recording:
    """Answers every final prompt in the JSON syntax and keeps the requests it was sent."""

    backend, identity = "fake", "fake:1"

    def __init__(self):
        self.requests = []

    def generate(self, requests):
        self.requests += requests
        return [ChatResponse('{"thought": "It is stated.", "answer": "Paris"}') for _ in requests]


def test_reasking_reads_and_constrains_in_the_trajectorys_prompt_version():
    from factory.agent.loop import step_constraints

    llm = Recording()
    asks = [("knowtrace-json-v1", final_messages("knowtrace-json-v1", "Q?", []))]
    replies, _ = reask(llm, asks, max_new_tokens=32, seed=0, repair_attempts=0, constrained_pairs=3)
    assert replies[0].status == "ok" and replies[0].answer == "Paris"  # the JSON version's own parser
    assert llm.requests[0].constraint == step_constraints("knowtrace-json-v1", 3)["final"]
    free = Recording()
    reask(free, asks, max_new_tokens=32, seed=0, repair_attempts=0)
    assert free.requests[0].constraint is None  # unconstrained unless the policy's decoding was
