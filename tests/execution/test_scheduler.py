"""Continuous scheduling against the mock OpenAI server: same records as lockstep, server kept busy,
rationalizations, and a stage run killed with SIGKILL that resumes to the same bytes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from factory.agent.policy import Policy
from factory.agent.scripted import ScriptedPolicyLLM
from factory.execution.sampling import sample_questions
from factory.execution.shards import shard_folder
from factory.llm.base import ChatRequest, ChatResponse, Sampling
from factory.llm.cache import CachedLLM
from factory.llm.responses import ResponseCache
from factory.params.config import Params
from factory.retrieval.bm25 import BM25Retriever
from schemas import read_rows
from tests.execution.test_shards import generate
from tests.mock_openai_server import MockOpenAIServer, openai_llm
from tests.stages.test_s05_trajectories import make_project, start_chain

ROOT = Path(__file__).resolve().parents[2]


def scripted_script(policy: ScriptedPolicyLLM):
    def script(messages: list[dict], model: str) -> str:
        return policy.generate([ChatRequest.of(messages, Sampling())])[0].text

    return script


class WrongUnlessHinted(ScriptedPolicyLLM):
    """Answers wrongly unless the prompt carries the rationalization hint."""

    def _one(self, request):
        user = request.messages[1][1]
        if "Hint:" not in user and user.startswith("Question:") and "Look up:" not in user:
            return ChatResponse("Thought: I think so.\nSufficient: yes\nAnswer: certainly not this")
        return super()._one(request)


class Lockstep:
    """The same backend without ``acomplete``: generate_trajectories then runs shards in lockstep."""

    def __init__(self, inner):
        self.inner, self.backend = inner, inner.backend

    @property
    def identity(self):
        return self.inner.identity

    def generate(self, requests):
        return self.inner.generate(requests)

    def count_tokens(self, text):
        return self.inner.count_tokens(text)

    def close(self):
        pass


@pytest.fixture(scope="module")
def setup(ingested):
    questions = sample_questions(ingested.questions, 12, seed=5, split="train")
    pool = {
        p["pid"]: {**p, "dataset": q["dataset"], "text": " ".join(p["sentences"])}
        for q in questions
        for p in q["passages"]
    }
    return questions, BM25Retriever.build(list(pool.values()))


def _generate(llm, setup, out, params, samples=2, rationalize=False):
    questions, retriever = setup
    return generate(params, questions, retriever, llm, out, samples, rationalize=rationalize)


def _backend(server, tmp_path, concurrency=4):
    inner = openai_llm([server.base_url], tmp_path, concurrency=concurrency, timeout_s=10, backoff_s=0.01)
    return CachedLLM(inner, ResponseCache(tmp_path / "responses.sqlite"))


@pytest.mark.parametrize("rationalize", [False, True])
def test_continuous_schedule_writes_the_bytes_of_lockstep_and_keeps_the_server_busy(
    setup, tmp_path, rationalize
):
    questions, _ = setup
    policy = (WrongUnlessHinted if rationalize else ScriptedPolicyLLM)(questions)
    params = Params(trajectories={"shard_size": 3, "window": 12}, llm={"concurrency": 4})
    with MockOpenAIServer(script=scripted_script(policy), latency_s=0.01, latency_sigma=1.0) as server:
        llm = _backend(server, tmp_path)
        continuous = _generate(
            llm, setup, tmp_path / "c" / "round_0.parquet", params, rationalize=rationalize
        )
        sent = server.state.completions
        assert server.state.max_in_flight == 4  # the bound is reached, never passed
        lockstep = _generate(
            Lockstep(llm), setup, tmp_path / "l" / "round_0.parquet", params, rationalize=rationalize
        )
        assert server.state.completions == sent  # the lockstep run was answered from the cache
        llm.close()
    assert (tmp_path / "c" / "round_0.parquet").read_bytes() == (
        tmp_path / "l" / "round_0.parquet"
    ).read_bytes()
    assert continuous == lockstep and not shard_folder(tmp_path / "c" / "round_0.parquet").exists()
    ordinary = [r for r in continuous if not r["rationalized"]]
    assert [(r["question_id"], r["sample"]) for r in ordinary] == [
        (q["question_id"], s) for q in questions for s in (0, 1)
    ]  # plan order, whatever order they finished in
    if rationalize:
        hinted = [r for r in continuous if r["rationalized"]]
        assert len(hinted) == len(questions) and all(r["correct"] and r["sample"] == 2 for r in hinted)
    else:
        assert all(r["status"] == "ok" and r["correct"] for r in continuous)


def test_journal_resumes_without_loss_or_duplicates_and_drops_a_torn_line(setup, tmp_path):
    questions, _ = setup
    policy = ScriptedPolicyLLM(questions)
    params = Params(llm={"concurrency": 3})
    out = tmp_path / "round_0.parquet"
    with MockOpenAIServer(script=scripted_script(policy)) as server:
        llm = _backend(server, tmp_path)
        reference = _generate(llm, setup, tmp_path / "ref" / "round_0.parquet", params, samples=1)
        records = read_rows(tmp_path / "ref" / "round_0.parquet")
        # a checkpoint as a killed run leaves it: 5 finished records and half of a sixth
        from factory.execution.generate import plan_fingerprint, record_key
        from factory.execution.shards import Journal

        fp = plan_fingerprint(
            params,
            llm,
            Policy("base", None, -1),
            [0],
            Sampling(temperature=0.7, seed=5),
            "v/seed_0/round_0",
            False,
        )
        journal = Journal(out, fp, [q["question_id"] for q in questions], key=record_key)
        for record in records[3:8]:  # finished out of plan order
            journal.append(record)
        journal.close()
        torn = json.dumps(records[8])[:100].encode()
        with open(journal.path, "ab") as fh:
            fh.write(torn)
        sent = server.state.completions
        resumed = _generate(llm, setup, out, params, samples=1)
        llm.close()
    assert resumed == reference and out.read_bytes() == (tmp_path / "ref" / "round_0.parquet").read_bytes()
    assert server.state.completions == sent  # the 7 missing trajectories replayed from the cache


KILL_N = 30


def _stage_argv(base_url: str) -> list[str]:
    sets = {
        "llm.backend": "openai",
        "llm.base_urls": [base_url],
        "llm.model": "mock-model",
        "model.base": "served",  # the served weights, local: what a stage on the openai backend needs
        "llm.concurrency": 4,
        "llm.backoff_s": 0.01,
        "trajectories.window": 8,
        "trajectories.n_questions": KILL_N,
    }
    argv = ["trajectories", "--variant", "backtrace", "--round", "0"]
    for k, v in sets.items():
        argv += ["--set", f"{k}={json.dumps(v)}"]
    return argv


@pytest.mark.slow
def test_stage_killed_with_sigkill_resumes_to_the_same_bytes(tmp_path, monkeypatch, ingested):
    from factory.cli import main
    from factory.utils import paths

    monkeypatch.chdir(tmp_path)
    questions = make_project(tmp_path, ingested, train=KILL_N, heldout=1)
    start_chain(tmp_path, "backtrace")
    (tmp_path / "served").mkdir()
    policy = ScriptedPolicyLLM(questions)
    out = tmp_path / paths.trajectories("backtrace", 0)
    journal = shard_folder(out) / "journal.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FACTORY_NO_PROGRESS": "1"}
    with MockOpenAIServer(
        script=scripted_script(policy), latency_s=0.05, latency_sigma=1.0, record=False
    ) as server:
        argv = _stage_argv(server.base_url)
        child = subprocess.Popen([sys.executable, "-m", "factory.cli", *argv], cwd=tmp_path, env=env)
        deadline = time.monotonic() + 120
        while not (journal.exists() and journal.read_bytes().count(b"\n") >= 6):
            assert child.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no record was journaled in time"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)  # mid-run: other trajectories are in flight
        child.wait()
        killed_at = journal.read_bytes().count(b"\n")
        assert not out.exists() and 6 <= killed_at < KILL_N
        assert main(argv) == 0  # the re-run resumes from the journal
        resumed = out.read_bytes()
        metrics = json.loads((tmp_path / paths.stage_metrics("trajectories", "backtrace", 0)).read_text())
        sent = server.state.completions
        out.unlink()
        assert main(argv) == 0  # an uninterrupted run, answered from the response cache
        assert server.state.completions == sent
    rows = read_rows(out)
    assert out.read_bytes() == resumed
    assert len(rows) == KILL_N and len({r["question_id"] for r in rows}) == KILL_N
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows if r["status"] != "ok"]
    assert metrics["cache"]["hits"] > 0  # calls of the killed run were not paid for twice
