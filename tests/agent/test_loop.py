"""The KnowTrace loop: scripted policy on real questions, statuses, repairs, stops, hints, batching."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from factory.agent import prompts
from factory.agent.format import render_complete, render_explore, render_final
from factory.agent.loop import Run, run_trajectories, trajectory_id
from factory.agent.policy import Policy, assert_trainable
from factory.agent.scripted import ScriptedPolicyLLM
from factory.llm.base import ChatRequest, ChatResponse, Sampling
from factory.params.config import Params
from factory.retrieval.bm25 import BM25Retriever
from factory.utils.errors import FactoryError
from factory.utils.text import content_tokens
from schemas import write_parquet
from tests.scripted import own_passages

BASE = Policy("base", None, -1)
DATASETS = ("hotpotqa", "2wikimultihopqa", "musique")


@pytest.fixture(scope="module")
def questions(ingested) -> list[dict]:
    """Six questions of each dataset (every question type the sample has; the agent runs alike on every
    split, and 2WikiMultihopQA's shared sample is its dev file alone)."""
    out = []
    for ds in DATASETS:
        out += [q for q in ingested.questions if q["dataset"] == ds][:6]
    return out


@pytest.fixture(scope="module")
def retriever(questions) -> BM25Retriever:
    return BM25Retriever.build(own_passages(questions))


class FakeLLM:
    """A policy given as a function (kind, request) -> text | ChatResponse; records every batch."""

    backend = "fake"
    identity = "fake-policy"

    def __init__(self, reply: Callable[[str, ChatRequest], str | ChatResponse]):
        self.reply, self.batches = reply, []

    def generate(self, requests: list[ChatRequest]) -> list[ChatResponse]:
        self.batches.append(list(requests))
        out = []
        for r in requests:
            got = self.reply(prompts.step_kind(r.messages), r)
            out.append(
                got
                if isinstance(got, ChatResponse)
                else ChatResponse(got, prompt_tokens=10, completion_tokens=len(got.split()))
            )
        return out

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def close(self) -> None:
        pass


def run(questions, llm, retriever, params=None, samples=1, rationalized=False, **kw):
    lockstep = Run(questions, llm, retriever, params or Params(), BASE, 0, Sampling(), **kw)
    return run_trajectories(lockstep, questions, samples, rationalized=rationalized)


def test_scripted_policy_answers_real_questions_of_every_dataset(questions, retriever, ingested, tmp_path):
    llm = ScriptedPolicyLLM(questions, ingested.passages)
    records = run(questions, llm, retriever)
    assert len(records) == len(questions)
    for q, r in zip(questions, records):
        assert r["question_id"] == q["question_id"] and r["status"] == "ok", (r["question_id"], r["error"])
        assert r["correct"] and r["em"] == 1.0 and r["f1"] == 1.0
        assert r["policy"] == "scripted" and r["prompt_version"] == "knowtrace-v1"
        kinds = [s["kind"] for s in r["steps"]]
        assert kinds[0] == "explore" and "complete" in kinds
        assert [s["index"] for s in r["steps"]] == list(range(len(r["steps"])))
    # the scripted facts come from gold supporting passages and ground there
    gold_grounded = Counter()
    for q, r in zip(questions, records):
        gold = {s["pid"] for s in q["supporting"]}
        gold_grounded[q["dataset"]] += sum(1 for t in r["triplets"] if t["source_pid"] in gold)
    assert all(gold_grounded[ds] >= 6 for ds in DATASETS), gold_grounded
    write_parquet(records, tmp_path / "t.parquet", "trajectory")  # schema-valid


def test_ids_are_stable_and_unique_and_runs_are_deterministic(questions, retriever, ingested):
    a = run(
        questions[:4], ScriptedPolicyLLM(questions), retriever, samples=2, run_id="backtrace/seed_0/round_0"
    )
    b = run(
        questions[:4], ScriptedPolicyLLM(questions), retriever, samples=2, run_id="backtrace/seed_0/round_0"
    )
    assert a == b
    assert [r["trajectory_id"] for r in a] == [
        trajectory_id("backtrace/seed_0/round_0", q["question_id"], s) for q in questions[:4] for s in (0, 1)
    ]
    triplet_ids = [t["triplet_id"] for r in a for t in r["triplets"]]
    pair_ids = [p["pair_id"] for r in a for s in r["steps"] for p in s["pairs"]]
    assert len(set(triplet_ids)) == len(triplet_ids) and len(set(pair_ids)) == len(pair_ids)
    for r in a:  # every triplet points at the complete step that made it and at a pair of an explore step
        steps = r["steps"]
        pairs = {p["pair_id"] for s in steps for p in s["pairs"]}
        for t in r["triplets"]:
            step = steps[t["step_index"]]
            assert (
                step["kind"] == "complete"
                and t["triplet_id"] in step["triplet_ids"]
                and t["pair_id"] in pairs
            )


def test_all_trajectories_run_in_lockstep_batches(questions, retriever):
    scripted = ScriptedPolicyLLM(questions)
    spy = FakeLLM(lambda kind, r: scripted.generate([r])[0])
    records = run(questions, spy, retriever, samples=2)
    total_calls = sum(r["llm_calls"] for r in records)
    assert len(spy.batches[0]) == 2 * len(questions)  # every trajectory's first explore in one batch
    assert len(spy.batches) <= 2 * Params().agent.max_iterations + 1
    assert sum(len(b) for b in spy.batches) == total_calls
    assert all(r["status"] == "ok" for r in records)


def test_garbage_outputs_end_in_parse_error_after_repairs_with_raw_output_kept(questions, retriever):
    params = Params(agent={"repair_attempts": 2})
    llm = FakeLLM(lambda kind, r: "I am not sure what you mean.")
    records = run(questions[:3], llm, retriever, params=params, samples=2)
    assert len(records) == 6
    for r in records:
        assert r["status"] == "parse_error" and r["stop_reason"] == "parse_error"
        assert r["error"].startswith("step 0 (explore)") and r["answer"] is None and not r["correct"]
        explore, final = r["steps"]
        assert explore["kind"] == "explore" and explore["status"] == "parse_error"
        assert explore["output"] == "I am not sure what you mean." and explore["error"]
        assert explore["attempts"] == 3  # 1 + 2 repairs
        assert (
            explore["messages"][-1]["role"] == "user"
            and "could not be read" in explore["messages"][-1]["content"]
        )
        assert final["kind"] == "final" and final["status"] == "parse_error" and final["attempts"] == 3
        assert r["llm_calls"] == 6


def test_a_repaired_output_is_accepted(questions, retriever):
    def reply(kind, r):
        if kind == "explore" and len(r.messages) == 2:
            return "Thought: hmm"  # no pairs, no answer: unreadable
        if kind == "explore":
            return render_explore("Now properly.", [], sufficient=True, answer="Paris")
        raise AssertionError(kind)

    (rec,) = run(questions[:1], FakeLLM(reply), retriever)
    (step,) = rec["steps"]
    assert rec["status"] == "ok" and rec["answer"] == "Paris" and step["attempts"] == 2
    assert [m["role"] for m in step["messages"]] == ["system", "user", "assistant", "user"]
    assert step["messages"][2]["content"] == "Thought: hmm"


def test_llm_errors_end_in_llm_error_with_the_reason_and_one_record_each(questions, retriever):
    def reply(kind, r):
        if r.sample == 1:
            return ChatResponse("", error="HTTP 500 after 5 retries", finish_reason="error")
        return render_explore("Easy.", [], sufficient=True, answer="x")

    records = run(questions[:4], FakeLLM(reply), retriever, samples=2)
    assert [(r["question_id"], r["sample"]) for r in records] == [
        (q["question_id"], s) for q in questions[:4] for s in (0, 1)
    ]
    for r in records:
        if r["sample"] == 1:
            assert r["status"] == "llm_error" and "HTTP 500 after 5 retries" in r["error"]
            assert [s["status"] for s in r["steps"]] == [
                "llm_error",
                "llm_error",
            ]  # explore, then the forced final
        else:
            assert r["status"] == "ok" and r["answer"] == "x"


def test_max_iterations_then_a_forced_final_answer(questions, retriever):
    counter = iter(range(10_000))

    def reply(kind, r):
        n = next(counter)
        if kind == "explore":
            return render_explore("More.", [(f"Entity{n}", "relation")])
        if kind == "complete":
            return render_complete([(f"Entity{n}", "relation", f"Value{n}")])
        return render_final("Best guess from the graph.", "Value1")

    params = Params(agent={"max_iterations": 3})
    (rec,) = run(questions[:1], FakeLLM(reply), retriever, params=params)
    assert rec["status"] == "max_iterations" and rec["stop_reason"] == "max_iterations"
    assert [s["kind"] for s in rec["steps"]] == ["explore", "complete"] * 3 + ["final"]
    assert rec["answer"] == "Value1" and rec["final_thought"] == "Best guess from the graph."
    assert len(rec["triplets"]) == 3
    final_prompt = rec["steps"][-1]["messages"][1]["content"]
    assert all(f"; Value{i})" in final_prompt for i in (1, 3, 5))  # the final call sees all of G


def test_stop_when_an_iteration_adds_no_new_triplet(questions, retriever):
    def reply(kind, r):
        if kind == "explore":
            return render_explore("Again.", [("Paris", "country"), ("Paris", "population")])
        if kind == "complete":
            return "(Paris ; country ; France)\n(paris ; Country ; France.)\n- Paris | country | France"
        return render_final("It is France.", "France")

    (rec,) = run(questions[:1], FakeLLM(reply), retriever)
    assert rec["status"] == "ok" and rec["stop_reason"] == "no_new_triplets"
    assert [s["kind"] for s in rec["steps"]] == [
        "explore",
        "complete",
        "complete",
        "explore",
        "complete",
        "complete",
        "final",
    ]
    assert len(rec["triplets"]) == 1  # all valid triplets kept, de-duplicated against G
    assert (
        rec["steps"][1]["triplet_ids"] == [rec["triplets"][0]["triplet_id"]]
        and rec["steps"][2]["triplet_ids"] == []
    )
    assert rec["answer"] == "France"


def test_all_triplets_of_a_completion_are_kept_and_grounded(questions, retriever):
    q = questions[0]
    title, sentences = q["passages"][0]["title"], q["passages"][0]["sentences"]
    words = content_tokens(sentences[0])  # names as words of the passage, without its brackets

    def reply(kind, r):
        if kind == "explore":
            if "(empty)" in r.messages[1][1]:
                return render_explore("Look.", [(title, "about")])
            return render_explore("Done.", [], sufficient=True, answer="no")
        return render_complete(
            [
                (title, "says", " ".join(words[:3])),
                (title, "also", " ".join(words[3:6])),
                ("Zorblax", "is", "Quuxian"),
            ]
        )

    (rec,) = run([q], FakeLLM(reply), retriever, params=Params(retrieval={"top_n": 10}))
    assert len(rec["triplets"]) == 3
    assert [t["source_pid"] for t in rec["triplets"]][:2] == [q["passages"][0]["pid"]] * 2
    assert rec["triplets"][2]["source_pid"] is None  # hallucinated: ungrounded, still kept
    assert rec["steps"][1]["retrieved"] and len(rec["steps"][1]["retrieved"]) <= 10


def test_lines_that_are_not_triplets_are_recorded_with_the_step_never_as_nodes(questions, retriever):
    q = questions[0]
    title, words = q["passages"][0]["title"], content_tokens(q["passages"][0]["sentences"][0])
    chatter = f"({title}'s founder, is not a 25 ; 1755)  The answer, ; 1755, is not a 25 , 1755. )"

    def reply(kind, r):
        if kind == "explore":
            if "(empty)" in r.messages[1][1]:
                return render_explore("Look.", [(title, "about")])
            return render_explore("Done.", [], sufficient=True, answer="no")
        return render_complete([(title, "says", " ".join(words[:3]))]) + "\n" + chatter

    (rec,) = run([q], FakeLLM(reply), retriever)
    complete = rec["steps"][1]
    assert complete["status"] == "ok" and len(rec["triplets"]) == 1
    assert complete["error"].startswith("lines not read as triplets: ") and "is not a 25" in complete["error"]
    assert complete["output"].endswith(chatter)  # the raw output keeps the line


def test_rationalized_trajectories_never_record_the_hint(questions, retriever):
    seen_hints = []

    def reply(kind, r):
        user = r.messages[1][1]
        if "Hint:" in user:
            seen_hints.append(kind)
        if kind == "explore":
            answer = user.split('answer is "', 1)[1].split('"', 1)[0] if "Hint:" in user else "wrong"
            return render_explore("Known.", [], sufficient=True, answer=answer)
        raise AssertionError(kind)

    records = run(questions[:3], FakeLLM(reply), retriever, samples=[1], rationalized=True)
    assert seen_hints == ["explore"] * 3  # the model saw the hint
    for _, r in zip(questions, records):
        assert (
            r["rationalized"]
            and r["correct"]
            and r["trajectory_id"].endswith("/rationalized")
            and r["sample"] == 1
        )
        text = "\n".join(m["content"] for s in r["steps"] for m in s["messages"])
        assert "Hint:" not in text and "correct answer is" not in text
    plain = run(questions[:3], FakeLLM(reply), retriever)
    assert [r["steps"][0]["messages"] for r in plain] == [r["steps"][0]["messages"] for r in records]


def test_prompt_version_is_recorded_and_unknown_versions_fail(questions, retriever):
    llm = ScriptedPolicyLLM(questions)
    rec = run(questions[:1], llm, retriever)[0]
    assert rec["prompt_version"] == "knowtrace-v1"
    assert rec["steps"][0]["messages"][0]["content"] == prompts.PROMPTS["knowtrace-v1"].explore_system
    with pytest.raises(FactoryError, match="prompt_version"):
        run(questions[:1], llm, retriever, params=Params(agent={"prompt_version": "knowtrace-v0"}))


def test_pair_limit_and_query_with_question(questions, retriever):
    queries = []

    class SpyRetriever:
        def search(self, query, dataset, top_n, pool=None):
            queries.append((query, dataset, top_n, tuple(pool or ())))
            return retriever.search(query, dataset, top_n, pool)

    def reply(kind, r):
        if kind == "explore":
            return render_explore("Many.", [(f"E{i}", "r") for i in range(5)])
        return "None"

    q = questions[0]
    params = Params(agent={"max_pairs": 2}, retrieval={"top_n": 4, "query_with_question": True})
    (rec,) = run([q], FakeLLM(reply), SpyRetriever(), params=params)
    assert len(rec["steps"][0]["pairs"]) == 2 and len(queries) == 2
    assert queries[0][0] == f"E0 r {q['question']}" and queries[0][2] == 4
    assert set(queries[0][3]) == {
        p["pid"] for p in q["passages"]
    }  # scope 'question': the question's own pool
    assert rec["stop_reason"] == "no_new_triplets"


def test_scripted_trajectories_are_refused_for_training(questions, retriever):
    records = run(questions[:2], ScriptedPolicyLLM(questions), retriever)
    with pytest.raises(FactoryError, match="policy 'scripted'.*tests and analysis only"):
        assert_trainable(records)
    assert_trainable([{**r, "policy": "backtrace-r1"} for r in records])
    with pytest.raises(FactoryError):
        assert_trainable([{"trajectory_id": "x", "policy": "simulated"}])


def test_scripted_policy_cannot_be_chosen_by_params():
    with pytest.raises(FactoryError):
        from factory.params.config import load_params

        load_params(None, ["llm.backend=scripted"])


def test_an_empty_completion_is_a_fault_of_the_call_not_a_reason_to_repair(questions, retriever):
    def reply(kind, r):
        return ChatResponse("", finish_reason="stop")  # what the backends retried and still got

    llm = FakeLLM(reply)
    (rec,) = run(questions[:1], llm, retriever, params=Params(agent={"repair_attempts": 2}))
    assert rec["status"] == "llm_error" and "empty completion" in rec["error"]
    assert [s["attempts"] for s in rec["steps"]] == [1, 1]  # explore, forced final: never re-asked
    assert all(len(r.messages) == 2 for batch in llm.batches for r in batch)  # no repair turn was sent


def test_json_prompt_version_end_to_end_with_constraints_on_every_call(questions, retriever, ingested):
    from factory.agent.loop import step_constraints

    version = "knowtrace-json-v1"
    scripted = ScriptedPolicyLLM(questions, ingested.passages)
    seen = []

    def reply(kind, r):
        seen.append((kind, r.constraint))
        return scripted.generate([r])[0]

    params = Params(agent={"prompt_version": version}, llm={"constrained": "on"})
    records = run(questions[:6], FakeLLM(reply), retriever, params=params)
    assert all(r["status"] == "ok" and r["correct"] and r["prompt_version"] == version for r in records)
    assert all(s["output"].startswith("{") for r in records for s in r["steps"])  # replies in JSON
    expected = step_constraints(version, params.agent.max_pairs)
    assert seen and all(c == expected[kind] for kind, c in seen)
    unconstrained = run(
        questions[:1], FakeLLM(reply), retriever, params=Params(agent={"prompt_version": version})
    )
    assert unconstrained and seen[-1][1] is None  # auto: off for a backend that is not local
