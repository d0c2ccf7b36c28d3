"""Trajectory-engine benchmark, agent part: the factory's own CPU time per agent step.

The agent loop (prompts, parsing, retrieval, grounding, records) runs on real questions of the
shared corpora; the policy is the scripted gold policy, so trajectories have realistic lengths
(explore -> complete per pair -> ... -> answer). Two set-ups:

(1) in process: the scripted policy answers directly (no network), so the process's CPU time is
    the agent loop's own plus the script's (an upper bound on the loop's);
(2) the trajectories stage's own driver (``generate_trajectories``: checkpoint, response cache,
    final file) through the real openai backend against the mock OpenAI server in its own process,
    at bounded concurrency, for the continuous scheduler and for the lockstep baseline (today's
    shards of 32 questions, each in lockstep ticks): calls/s against the ideal concurrency / mean
    latency, and the process's CPU time per step and per call (the agent loop, scheduling, HTTP
    client and response cache: the continuous scheduler runs them all on the backend's event
    loop). ``report_agent_loop`` runs it at a fixed latency,
    ``report_variable_latency`` at a lognormal one (sigma 1: p99 about ten times the median).

Targets: the agent loop's CPU time <= 2 ms per step; under variable latency the continuous
scheduler >= 0.90 of ideal and >= 3x the lockstep baseline. ``python bench/agent_loop.py
[--variable --questions 1000]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.common import (  # noqa: E402 (after the sys.path line)
    corpora_files,
    free_port,
    print_table,
    wait_for_server,
)


def load_questions(n: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """``n`` questions spread over the three datasets, and their passages. Every split counts: the benches
    measure the driver, not a run's data, and the shared samples hold ~270 official-train questions, fewer
    than the 1,000 of (d)."""
    from factory.corpora.ingest import ingest_sources
    from factory.execution.sampling import sample_questions
    from factory.params.config import Params

    params = Params(corpora=corpora_files())
    result = ingest_sources(params)
    every = [{**q, "split": "train"} for q in result.questions]
    questions = sample_questions(every, n, seed=seed, split="train")
    pids = {p["pid"] for q in questions for p in q["passages"]}
    return questions, [p for p in result.passages if p["pid"] in pids]


class TimedLLM:
    """Measures the CPU and wall time spent inside ``generate`` (the backend's share)."""

    def __init__(self, inner):
        self.inner, self.cpu_s, self.wall_s, self.calls = inner, 0.0, 0.0, 0
        self.backend, self.identity = inner.backend, inner.identity

    def generate(self, requests):
        cpu, wall = time.process_time(), time.perf_counter()
        out = self.inner.generate(requests)
        self.cpu_s += time.process_time() - cpu
        self.wall_s += time.perf_counter() - wall
        self.calls += len(requests)
        return out

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def close(self) -> None:
        self.inner.close()


def run_agent(questions, passages, llm, samples: int) -> dict:
    """Run the loop once; CPU split into the backend's (inside generate) and the agent's (the rest)."""
    from factory.agent.loop import Run, run_trajectories
    from factory.agent.policy import Policy
    from factory.llm.base import Sampling
    from factory.params.config import Params
    from factory.retrieval.bm25 import BM25Retriever

    retriever = BM25Retriever.build(passages)
    timed = TimedLLM(llm)
    cpu, wall = time.process_time(), time.perf_counter()
    lockstep = Run(
        questions, timed, retriever, Params(), Policy("base", None, -1), 0, Sampling(temperature=0.7)
    )
    records = run_trajectories(lockstep, questions, samples)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    steps = sum(len(r["steps"]) for r in records)
    return {
        "trajectories": len(records),
        "ok": sum(r["status"] == "ok" for r in records),
        "correct": sum(r["correct"] for r in records),
        "steps": steps,
        "calls": timed.calls,
        "wall_s": wall,
        "calls_per_s": timed.calls / wall,
        "total_cpu_ms_per_step": 1000 * cpu / steps,
        "backend_cpu_ms_per_step": 1000 * timed.cpu_s / steps,
        "agent_cpu_ms_per_step": 1000 * (cpu - timed.cpu_s) / steps,
    }


def serve(port: int, latency_s: float, n: int, seed: int, latency_sigma: float = 0.0) -> None:
    """The mock server whose replies are the scripted policy's (run in its own process)."""
    import uvicorn

    from factory.agent.scripted import ScriptedPolicyLLM
    from factory.llm.base import ChatRequest, Sampling
    from tests.mock_openai_server import MockState, make_app

    questions, passages = load_questions(n, seed)
    policy = ScriptedPolicyLLM(questions, passages)

    def script(messages: list[dict], model: str) -> str:
        return policy.generate([ChatRequest.of(messages, Sampling())])[0].text

    state = MockState(script=script, latency_s=latency_s, latency_sigma=latency_sigma, record=False)
    uvicorn.run(
        make_app(state), host="127.0.0.1", port=port, log_level="warning", backlog=2048, access_log=False
    )


class Lockstep:
    """The lockstep baseline: the same backend without ``acomplete``, so the stage's driver falls back to
    today's shards of ``trajectories.shard_size`` questions, each run in lockstep ticks."""

    def __init__(self, inner):
        self.inner, self.backend = inner, inner.backend

    @property
    def identity(self) -> str:
        return self.inner.identity

    def generate(self, requests):
        return self.inner.generate(requests)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def close(self) -> None:
        self.inner.close()


def _start_server(latency_s: float, n: int, seed: int, latency_sigma: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [
        sys.executable,
        __file__,
        "--serve",
        "--port",
        str(port),
        "--latency",
        str(latency_s),
        "--latency-sigma",
        str(latency_sigma),
        "--questions",
        str(n),
        "--seed",
        str(seed),
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT)
    base_url = f"http://127.0.0.1:{port}/v1"
    wait_for_server(base_url, proc, timeout_s=120)
    return proc, base_url


def _server_stats(base_url: str) -> dict:
    import httpx

    return httpx.get(base_url.removesuffix("/v1") + "/stats", timeout=10).json()


def bench_stage_driver(
    n: int,
    samples: int,
    latency_s: float,
    concurrency: int,
    seed: int = 0,
    latency_sigma: float = 0.0,
    schedulers: tuple[str, ...] = ("continuous", "lockstep"),
) -> dict[str, dict]:
    """The trajectories stage's own driver (generate_trajectories: checkpoint, response cache, final file)
    against the mock server, per scheduler; calls/s against the ideal concurrency / mean latency, where
    the mean is over the latencies the server drew for this run's calls."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from factory.agent.policy import Policy
    from factory.execution.generate import generate_trajectories
    from factory.llm.base import Sampling
    from factory.llm.cache import CachedLLM
    from factory.llm.openai_backend import OpenAILLM
    from factory.llm.responses import ResponseCache
    from factory.params.config import Params
    from factory.retrieval.bm25 import BM25Retriever

    questions, passages = load_questions(n, seed)
    retriever = BM25Retriever.build(passages)
    params = Params(llm={"concurrency": concurrency})  # shard_size 32, window 8 x concurrency: the defaults
    proc, base_url = _start_server(latency_s, n, seed, latency_sigma)
    out: dict[str, dict] = {}
    try:
        for scheduler in schedulers:
            with tempfile.TemporaryDirectory() as tmp:  # a fresh response cache: every call is sent
                cfg = params.llm.model_copy(
                    update={"base_urls": [base_url], "model": "mock-model", "timeout_s": 60, "max_retries": 3}
                )
                inner = OpenAILLM(cfg, registry_path=Path(tmp) / "lora_names.json")
                llm = CachedLLM(inner, ResponseCache(Path(tmp) / "responses.sqlite"))
                driven = llm if scheduler == "continuous" else Lockstep(llm)
                before = _server_stats(base_url)
                cpu, wall = time.process_time(), time.perf_counter()
                records = generate_trajectories(
                    params,
                    questions,
                    llm=driven,
                    retriever=retriever,
                    passages=None,
                    policy=Policy("base", None, -1),
                    round_=0,
                    samples=samples,
                    sampling=Sampling(temperature=0.7, seed=seed),
                    out_path=Path(tmp) / "round_0.parquet",
                    run_id="bench/round_0",
                    desc=f"bench {scheduler}",
                )
                wall = time.perf_counter() - wall
                cpu = time.process_time() - cpu
                after = _server_stats(base_url)
                llm.close()
                # the records are on disk (generate_trajectories returns how each ended)
                steps_column = pq.read_table(Path(tmp) / "round_0.parquet", columns=["steps"])["steps"]
                steps = int(pc.sum(pc.list_value_length(steps_column)).as_py())
            calls = after["completions"] - before["completions"]
            mean_latency = (after["latency_total_s"] - before["latency_total_s"]) / calls
            out[scheduler] = {
                "trajectories": len(records),
                "ok": sum(r["status"] == "ok" for r in records),
                "steps": steps,
                "calls": calls,
                "wall_s": wall,
                "calls_per_s": calls / wall,
                "mean_latency_s": mean_latency,
                "ideal_calls_per_s": concurrency / mean_latency,
                "fraction_of_ideal": calls / wall / (concurrency / mean_latency),
                "total_cpu_ms_per_step": 1000 * cpu / steps,
                "total_cpu_ms_per_call": 1000 * cpu / calls,
            }
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return out


def _stage_rows(runs: dict[str, dict], target: str) -> list[tuple[str, str, str]]:
    rows = []
    for name, r in runs.items():
        rows += [
            (f"{name}: trajectories (ok)", f"{r['trajectories']} ({r['ok']})", f"{r['calls']} calls"),
            (
                f"{name}: calls/s",
                f"{r['calls_per_s']:.1f}",
                f"ideal {r['ideal_calls_per_s']:.1f}/s (mean latency {1000 * r['mean_latency_s']:.0f} ms)",
            ),
            (
                f"{name}: fraction of ideal",
                f"{r['fraction_of_ideal']:.3f}",
                target if name == "continuous" else "",
            ),
            (
                f"{name}: process CPU ms / step",
                f"{r['total_cpu_ms_per_step']:.3f}",
                f"{r['total_cpu_ms_per_call']:.3f} ms / call: agent loop, scheduling, HTTP client, cache",
            ),
        ]
    if {"continuous", "lockstep"} <= set(runs):
        ratio = runs["continuous"]["calls_per_s"] / runs["lockstep"]["calls_per_s"]
        rows.append(
            ("continuous / lockstep calls/s", f"{ratio:.2f}x", "target >= 3x" if "0.90" in target else "")
        )
    rows.append(("machine load (1 min) / cores", f"{os.getloadavg()[0]:.1f} / {os.cpu_count()}", ""))
    return rows


def report_agent_loop(
    questions: int = 96,
    samples: int = 2,
    latency_s: float = 0.1,
    concurrency: int = 32,
    seed: int = 0,
    with_server: bool = True,
) -> None:
    """(c1) the agent loop in process, (c2) the stage's driver at a fixed latency (bench/trajectories.py
    calls this after its part (a))."""
    from factory.agent.scripted import ScriptedPolicyLLM

    qs, passages = load_questions(questions, seed)
    a = run_agent(qs, passages, ScriptedPolicyLLM(qs, passages), samples)

    def rows(r: dict) -> list[tuple[str, str, str]]:
        return [
            ("trajectories (ok / correct)", f"{r['trajectories']} ({r['ok']} / {r['correct']})", ""),
            ("steps (LLM calls)", f"{r['steps']} ({r['calls']})", ""),
            ("agent-loop CPU ms / step", f"{r['agent_cpu_ms_per_step']:.3f}", "target <= 2 ms"),
            ("backend CPU ms / step", f"{r['backend_cpu_ms_per_step']:.3f}", ""),
            ("total CPU ms / step", f"{r['total_cpu_ms_per_step']:.3f}", ""),
            ("wall s", f"{r['wall_s']:.2f}", ""),
        ]

    print_table(
        f"(c1) agent loop in process, scripted policy: {questions} questions x {samples} samples", rows(a)
    )
    if not with_server:
        return
    runs = bench_stage_driver(questions, samples, latency_s, concurrency, seed)
    print_table(
        f"(c2) the stage's driver via the openai backend vs the mock server: {questions} questions x "
        f"{samples} samples, fixed {latency_s * 1000:.0f} ms latency, concurrency {concurrency}",
        _stage_rows(runs, ""),
    )


def report_variable_latency(
    questions: int = 1000, latency_s: float = 0.1, sigma: float = 1.0, concurrency: int = 32, seed: int = 0
) -> dict[str, dict]:
    """(d) lognormal latency: the continuous scheduler vs the lockstep baseline (today's shards)."""
    runs = bench_stage_driver(questions, 1, latency_s, concurrency, seed, latency_sigma=sigma)
    print_table(
        f"(d) variable latency: the stage's driver, {questions} questions x 1 sample, lognormal latency "
        f"(median {latency_s * 1000:.0f} ms, sigma {sigma:g}), concurrency {concurrency}",
        _stage_rows(runs, "target >= 0.90"),
    )
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=96)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--latency-sigma", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--variable", action="store_true", help="run (d), the variable-latency comparison")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--skip-server", action="store_true", help="run the in-process set-up only")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.serve:
        serve(args.port, args.latency, args.questions, args.seed, args.latency_sigma)
        return
    if args.variable:
        report_variable_latency(args.questions, args.latency, 1.0, args.concurrency, args.seed)
        return
    report_agent_loop(
        args.questions,
        args.samples,
        args.latency,
        args.concurrency,
        args.seed,
        with_server=not args.skip_server,
    )


if __name__ == "__main__":
    main()
