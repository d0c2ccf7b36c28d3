"""Trajectory-engine benchmark: the openai and local backends, the agent loop, the stage's scheduler.

(a) openai backend against the mock OpenAI server (its own process, so its CPU time is not the
    client's) at a fixed latency per call and bounded concurrency: achieved calls/s as a fraction
    of the ideal concurrency / latency (target >= 0.7), the backend's own CPU time per call, and
    the response cache's overhead (cold run writing entries, warm run answering from them).
(b) local backend on models/base (SmolLM2-135M): tokens/s of batched generation (one batch of 16)
    vs the same prompts one at a time (target >= 3x).

(c) bench/agent_loop.py: the agent loop's CPU time per step in process (c1), and the trajectories
    stage's driver against the mock server at a fixed latency (c2);
(d) the same driver under variable latency (lognormal, sigma 1, median 100 ms; 1,000 questions x
    1 sample, concurrency 32): the continuous scheduler and the lockstep baseline (today's shards of
    32 questions, lockstep ticks) as fractions of the ideal concurrency / mean latency (targets >=
    0.90 of ideal and >= 3x the baseline).

Constrained decoding on SmolLM2 is bench/constrained.py (``make bench`` runs both).
Prints tables of figures and ratios. ``--skip-local`` skips (b); ``--skip-variable`` skips (d).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.common import free_port, print_table, wait_for_server  # noqa: E402 (after the sys.path line)

HOTPOT = ROOT.parent / "shared" / "corpora" / "hotpotqa" / "dev_sample.json"


def start_mock_server(latency_s: float) -> tuple[subprocess.Popen, str]:
    """The mock OpenAI server in its own process; returns (process, base_url) once it answers."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.mock_openai_server", "--port", str(port), "--latency", str(latency_s)],
        cwd=ROOT,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    wait_for_server(base_url, proc)
    return proc, base_url


def _chat_requests(n: int, max_new_tokens: int = 64):
    from factory.llm.base import ChatRequest, Sampling

    sampling = Sampling(max_new_tokens=max_new_tokens)
    return [
        ChatRequest.of(
            [{"role": "user", "content": f"Explore question {i}: who directed the film?"}], sampling
        )
        for i in range(n)
    ]


def bench_openai_backend(n_requests: int = 2000, latency_s: float = 0.1, concurrency: int = 32) -> dict:
    """(a) calls/s vs the ideal, CPU per call, and the cache's cold/warm cost."""
    import psutil

    from factory.llm.cache import CachedLLM
    from factory.llm.openai_backend import OpenAILLM
    from factory.llm.responses import ResponseCache
    from factory.params.agent_sections import LLMParams

    proc, base_url = start_mock_server(latency_s)
    server = psutil.Process(proc.pid)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cfg = LLMParams(
                base_urls=[base_url], model="mock-model", concurrency=concurrency, timeout_s=30, max_retries=3
            )
            llm = OpenAILLM(cfg, registry_path=Path(tmp) / "lora_names.json")
            llm.generate(_chat_requests(concurrency))  # warm-up: connections, imports
            requests = _chat_requests(n_requests)
            server_cpu0 = sum(server.cpu_times()[:2])
            cpu0, t0 = time.process_time(), time.perf_counter()
            out = llm.generate(requests)
            wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            server_cpu = sum(server.cpu_times()[:2]) - server_cpu0
            failed = sum(not r.ok for r in out)

            cached = CachedLLM(llm, ResponseCache(Path(tmp) / "responses.sqlite"))
            fresh = [r for r in _chat_requests(n_requests + 500)][n_requests:]  # 500 unseen prompts
            cpu0, t0 = time.process_time(), time.perf_counter()
            cached.generate(fresh)
            cold_wall, cold_cpu = time.perf_counter() - t0, time.process_time() - cpu0
            cpu0, t0 = time.process_time(), time.perf_counter()
            cached.generate(fresh)
            warm_wall, warm_cpu = time.perf_counter() - t0, time.process_time() - cpu0
            assert cached.hits == len(fresh), "warm run should be all hits"
            llm.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    ideal = concurrency / latency_s
    return {
        "requests": n_requests,
        "failed": failed,
        "calls_per_s": n_requests / wall,
        "ideal_calls_per_s": ideal,
        "fraction_of_ideal": n_requests / wall / ideal,
        "cpu_ms_per_call": 1000 * cpu / n_requests,
        "server_cpu_ms_per_call": 1000 * server_cpu / n_requests,
        "load_average_1m": os.getloadavg()[0],
        "cpu_count": os.cpu_count(),
        "cache_cold_cpu_ms_per_call": 1000 * cold_cpu / len(fresh),
        "cache_cold_calls_per_s": len(fresh) / cold_wall,
        "cache_warm_hits_per_s": len(fresh) / warm_wall,
        "cache_warm_cpu_ms_per_call": 1000 * warm_cpu / len(fresh),
    }


def hotpot_prompts(n: int) -> list[list[dict]]:
    """``n`` HotpotQA questions as short agent-style chat prompts (synthetic ones if the corpus is absent)."""
    if HOTPOT.exists():
        questions = [r["question"] for r in json.loads(HOTPOT.read_text())[:n]]
    else:
        questions = [f"Which country is the director of film number {i} from?" for i in range(n)]
    system = "You answer multi-hop questions. Think step by step, then give a short answer."
    return [
        [{"role": "system", "content": system}, {"role": "user", "content": f"Question: {q}\nThought:"}]
        for q in questions
    ]


def bench_local_backend(
    model_dir: Path, n_prompts: int = 16, batch_size: int = 16, max_new_tokens: int = 64
) -> dict:
    """(b) tokens/s of one batch of ``batch_size`` vs the same prompts one at a time (greedy)."""
    from factory.llm.base import ChatRequest, Sampling
    from factory.llm.local import LocalLLM
    from factory.params.agent_sections import LLMParams

    llm = LocalLLM(LLMParams(model=str(model_dir), batch_size=batch_size))  # device and dtype: auto
    sampling = Sampling(max_new_tokens=max_new_tokens)
    requests = [ChatRequest.of(m, sampling) for m in hotpot_prompts(n_prompts)]
    llm.generate(requests[:2])  # warm-up
    t0 = time.perf_counter()
    batched = llm.generate(requests)
    batched_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sequential = [llm.generate([r])[0] for r in requests]
    sequential_s = time.perf_counter() - t0
    llm.close()
    bt, st = sum(r.completion_tokens for r in batched), sum(r.completion_tokens for r in sequential)
    return {
        "model": llm.identity,
        "device": llm.device,
        "prompts": n_prompts,
        "max_new_tokens": max_new_tokens,
        "errors": sum(not r.ok for r in batched + sequential),
        "batched_tokens": bt,
        "batched_s": batched_s,
        "batched_tokens_per_s": bt / batched_s,
        "sequential_tokens": st,
        "sequential_s": sequential_s,
        "sequential_tokens_per_s": st / sequential_s,
        "speedup": (bt / batched_s) / (st / sequential_s),
        "same_text_share": sum(a.text == b.text for a, b in zip(batched, sequential)) / n_prompts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--model", type=Path, default=ROOT / "models" / "base")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument(
        "--threads", type=int, default=None, help="torch CPU threads for (b) (default: torch's choice)"
    )
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--skip-variable", action="store_true")
    parser.add_argument("--variable-questions", type=int, default=1000)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    a = bench_openai_backend(args.requests, args.latency, args.concurrency)
    print_table(
        f"(a) openai backend vs mock server: {a['requests']} calls, {args.latency * 1000:.0f} ms "
        f"latency, concurrency {args.concurrency}",
        [
            ("calls/s achieved", f"{a['calls_per_s']:.1f}", ""),
            ("ideal calls/s", f"{a['ideal_calls_per_s']:.1f}", ""),
            ("fraction of ideal", f"{a['fraction_of_ideal']:.3f}", "target >= 0.7"),
            ("backend CPU ms / call", f"{a['cpu_ms_per_call']:.3f}", ""),
            ("mock server CPU ms / call", f"{a['server_cpu_ms_per_call']:.3f}", "(its own process)"),
            ("failed calls", f"{a['failed']}", "0"),
            (
                "machine load (1 min) / cores",
                f"{a['load_average_1m']:.1f} / {a['cpu_count']}",
                "(other work competes for the cores)",
            ),
            (
                "cache cold: CPU ms / call",
                f"{a['cache_cold_cpu_ms_per_call']:.3f}",
                "(backend + cache writes)",
            ),
            ("cache warm: hits/s", f"{a['cache_warm_hits_per_s']:.0f}", ""),
            ("cache warm: CPU ms / call", f"{a['cache_warm_cpu_ms_per_call']:.3f}", ""),
        ],
    )
    from bench.agent_loop import report_agent_loop  # the agent part: the factory's own CPU time per step

    report_agent_loop(latency_s=args.latency, concurrency=args.concurrency)
    if not args.skip_variable:
        from bench.agent_loop import report_variable_latency

        report_variable_latency(args.variable_questions, args.latency, 1.0, args.concurrency)
    if args.skip_local:
        return
    if not (args.model / "config.json").exists():
        print(f"\n(b) skipped: {args.model} does not exist — run `factory prepare-model` first")
        return
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    b = bench_local_backend(args.model, args.prompts, args.batch_size, args.max_new_tokens)
    print_table(
        f"(b) local backend {b['model']} on {b['device']}: {b['prompts']} prompts, greedy, <= "
        f"{b['max_new_tokens']} new tokens",
        [
            (
                "batched tokens/s",
                f"{b['batched_tokens_per_s']:.1f}",
                f"batch {args.batch_size}: {b['batched_tokens']} tokens in {b['batched_s']:.1f} s",
            ),
            (
                "sequential tokens/s",
                f"{b['sequential_tokens_per_s']:.1f}",
                f"{b['sequential_tokens']} tokens in {b['sequential_s']:.1f} s",
            ),
            ("batched / sequential", f"{b['speedup']:.2f}x", "target >= 3x"),
            (
                "same text batched vs sequential",
                f"{b['same_text_share']:.2f}",
                "(bf16/fp32 padding noise may differ)",
            ),
            ("errors", f"{b['errors']}", "0"),
        ],
    )


if __name__ == "__main__":
    main()
