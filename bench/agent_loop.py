"""Trajectory-engine benchmark, agent part: the factory's own CPU time per agent step.

The agent loop (prompts, parsing, retrieval, grounding, records) runs on real questions of the
shared corpora; the policy is the scripted gold policy, so trajectories have realistic lengths
(explore -> complete per pair -> ... -> answer). Two set-ups:

(1) in process: the scripted policy answers directly (no network), so the process's CPU time is
    the agent loop's own plus the script's (an upper bound on the loop's);
(2) against the mock OpenAI server in its own process, at a fixed latency per call and bounded
    concurrency, through the real openai backend: CPU time inside ``llm.generate`` (the backend)
    is measured apart from the rest (the agent loop), and calls/s is compared with the ideal
    concurrency / latency.

Target: the agent loop's CPU time <= 2 ms per step. ``python bench/agent_loop.py``.
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
from bench.common import free_port, print_table, wait_for_server  # noqa: E402 (after the sys.path line)

CORPORA = ROOT.parent / "shared" / "corpora"


def load_questions(n: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """``n`` training questions spread over the three datasets, and their passages."""
    from factory.agent.sampling import sample_questions
    from factory.config import Params
    from factory.corpora import ingest_sources

    params = Params(
        corpora={
            "hotpotqa": [
                str(CORPORA / "hotpotqa" / "dev_sample.json"),
                str(CORPORA / "hotpotqa" / "train_sample.json"),
            ],
            "2wikimultihopqa": [str(CORPORA / "2wikimultihopqa" / "dev_sample.json")],
            "musique": [
                str(CORPORA / "musique" / "dev_sample.jsonl"),
                str(CORPORA / "musique" / "train_sample.jsonl"),
            ],
        }
    )
    result = ingest_sources(params)
    questions = sample_questions(result.questions, n, seed=seed, split="train")
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
    from factory.agent.loop import run_trajectories
    from factory.agent.policy import Policy
    from factory.config import Params
    from factory.llm.base import Sampling
    from factory.retrieval.bm25 import BM25Retriever

    retriever = BM25Retriever.build(passages)
    timed = TimedLLM(llm)
    cpu, wall = time.process_time(), time.perf_counter()
    records = run_trajectories(
        questions, timed, retriever, Params(), Policy("base", None, -1), 0, samples, Sampling(temperature=0.7)
    )
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


def serve(port: int, latency_s: float, n: int, seed: int) -> None:
    """The mock server whose replies are the scripted policy's (run in its own process)."""
    import uvicorn

    from factory.agent.scripted import ScriptedPolicyLLM
    from factory.llm.base import ChatRequest, Sampling
    from tests.mock_openai_server import MockState, make_app

    questions, passages = load_questions(n, seed)
    policy = ScriptedPolicyLLM(questions, passages)

    def script(messages: list[dict], model: str) -> str:
        return policy.generate([ChatRequest.of(messages, Sampling())])[0].text

    state = MockState(script=script, latency_s=latency_s, record=False)
    uvicorn.run(
        make_app(state), host="127.0.0.1", port=port, log_level="warning", backlog=2048, access_log=False
    )


def bench_mock_server(n: int, samples: int, latency_s: float, concurrency: int, seed: int) -> dict:
    from factory.llm.openai_backend import OpenAILLM

    port = free_port()
    cmd = [
        sys.executable,
        __file__,
        "--serve",
        "--port",
        str(port),
        "--latency",
        str(latency_s),
        "--questions",
        str(n),
        "--seed",
        str(seed),
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_for_server(base_url, proc, timeout_s=120)
        questions, passages = load_questions(n, seed)
        with tempfile.TemporaryDirectory() as tmp:
            llm = OpenAILLM(
                [base_url],
                "mock-model",
                concurrency=concurrency,
                timeout_s=30,
                max_retries=3,
                registry_path=Path(tmp) / "lora_names.json",
            )
            out = run_agent(questions, passages, llm, samples)
            llm.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    out["ideal_calls_per_s"] = concurrency / latency_s
    out["fraction_of_ideal"] = out["calls_per_s"] / out["ideal_calls_per_s"]
    return out


def report_agent_loop(
    questions: int = 96,
    samples: int = 2,
    latency_s: float = 0.1,
    concurrency: int = 32,
    seed: int = 0,
    with_server: bool = True,
) -> None:
    """Run (c1) and (c2) and print their tables (bench/trajectories.py calls this after its part (a))."""
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
    b = bench_mock_server(questions, samples, latency_s, concurrency, seed)
    print_table(
        f"(c2) agent loop via the openai backend vs the mock server: {latency_s * 1000:.0f} ms latency, "
        f"concurrency {concurrency}",
        rows(b)
        + [
            (
                "calls/s achieved (lockstep ticks)",
                f"{b['calls_per_s']:.1f}",
                f"ideal {b['ideal_calls_per_s']:.0f}/s",
            ),
            ("fraction of ideal", f"{b['fraction_of_ideal']:.3f}", "(a tick waits for its slowest call)"),
            ("machine load (1 min) / cores", f"{os.getloadavg()[0]:.1f} / {os.cpu_count()}", ""),
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=96)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--skip-server", action="store_true", help="run the in-process set-up only")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.serve:
        serve(args.port, args.latency, args.questions, args.seed)
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
