"""Scale benchmark: one bootstrapping round through the stages at two corpus sizes.

The corpora are the shared samples copied until they are a fraction of the three full corpora
(``bench/scale_corpora.py``: ids, questions and titles unique per copy). The policy costs nothing:
an OpenAI-compatible mock server in its own process (``--serve``) answers every KnowTrace prompt at
once, in the format the parser reads: a lookup pair until the graph has enough triplets, four
grounded triplets per completion, the hint's answer when rationalizing (so rounds have correct
trajectories) and a wrong answer otherwise. Retrieval is ``index.scope: pooled``; the response
cache is on. Each stage runs as ``factory <stage>`` in a fresh project folder, as DVC runs it.

Per stage it prints wall time, peak RSS (the stage's process tree, sampled every 50 ms), CPU time,
rows written, LLM calls and the factory's CPU per call, then per stage the growth exponent between
the two sizes: log(time ratio) / log(work ratio), where work is what the stage scales with
(questions read, passages indexed, trajectories); a stage whose work is fixed (500 held-out
questions, 200 counterfactual trajectories) is measured against the corpus instead, and should not
grow with it. Targets: exponents <= 1.1; peak RSS <= 4 GB; factory CPU per call <= 1 ms.

    python bench/scale.py                  # 2% and 8% of the full corpora (make bench)
    python bench/scale.py --full           # 25% and 100%: ~300k questions, ~3M passages, 20,000 a round
    python bench/scale.py --sizes 0.01 0.04 --keep
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.common import free_port, wait_for_server  # noqa: E402 (after the sys.path line)
from factory.variants import registry  # noqa: E402

VARIANT = registry.REFERENCE.name  # the one chain the benchmark runs, round 0 of protocol seed 0
CHAIN = f"{VARIANT}/seed_0/round_0"
ROUND_QUESTIONS_FULL = 20_000  # training questions a round at full size
HELDOUT = 500
COUNTERFACTUAL = 200
GB = 1024**3

# ---------------------------------------------------------------- the mock policy (its own process)

_HINT = re.compile(r'Hint: the correct answer is "(.*)"\.')
_PASSAGE = re.compile(r"^\[\d+\] (.*?): (.*)$")
_RELATIONS = ("described in", "mentions", "related to", "part of")


def mock_reply(messages: list[dict]) -> str:
    """A reply in the KnowTrace text format for any agent prompt (explore, complete, final, repair)."""
    from factory.agent import format as fmt
    from factory.agent import prompts

    found = prompts.version_and_kind(messages)
    kind = found[1] if found else "final"
    user = messages[1]["content"]
    hint = _HINT.search(user)
    question = user.split("\n", 1)[0].removeprefix("Question: ")
    if kind == "complete":
        shown = [m.groups() for m in map(_PASSAGE.match, user.split("Passages:\n", 1)[-1].splitlines()) if m]
        if not shown:
            return fmt.render_complete([])
        triplets = []
        for j, relation in enumerate(_RELATIONS):
            title, text = shown[j % len(shown)]
            words = [w for w in re.findall(r"[A-Za-z0-9]{3,}", text)]
            obj = " ".join(words[2 * j : 2 * j + 2]) or title
            triplets.append((title, relation, obj))
        return fmt.render_complete(triplets)
    graph = []
    for line in user.split("Graph:\n", 1)[-1].splitlines():
        try:
            graph.append(fmt.parse_triplet(line))
        except Exception:  # '(empty)', the hint line
            continue
    last = graph[-1][2] if graph else None
    if kind == "final":
        return fmt.render_final("From the graph.", hint.group(1) if hint else (last or "unknown"))
    if hint and len(graph) >= 4:
        return fmt.render_explore("The graph leads to the answer.", [], sufficient=True, answer=hint.group(1))
    if len(graph) >= 8:
        return fmt.render_explore("The graph is enough.", [], sufficient=True, answer=last)
    # the first lookup names a few of the question's words and its last (the copy's tag): every copy
    # of a question sends its own queries, so nothing repeats across copies that real data would not
    words = question.split()
    entity = graph[-1][0] if graph else " ".join(words[1:4] + words[-1:]) or question
    return fmt.render_explore("I need more facts.", [(entity, "connection")])


def serve(port: int, latency_s: float = 0.0, capacity: int | None = None) -> None:
    """The mock policy server (its own process); bench/fleet.py gives it a latency and a capacity."""
    import uvicorn

    from tests.mock_openai_server import MockState, make_app

    state = MockState(
        script=lambda messages, model: mock_reply(messages),
        record=False,
        latency_s=latency_s,
        capacity=capacity,
    )
    uvicorn.run(
        make_app(state), host="127.0.0.1", port=port, log_level="warning", backlog=2048, access_log=False
    )


def start_server() -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve", str(port)], cwd=ROOT)
    base_url = f"http://127.0.0.1:{port}/v1"
    wait_for_server(base_url, proc)
    return proc, base_url


def server_calls(base_url: str) -> int:
    import httpx

    return int(httpx.get(base_url.removesuffix("/v1") + "/stats", timeout=10).json()["completions"])


# ---------------------------------------------------------------- one size


def stage_commands(variant: str = VARIANT) -> list[tuple[str, list[str]]]:
    chain = ["--variant", variant, "--seed", "0", "--round", "0"]
    return [
        ("ingest", ["ingest"]),
        ("decontaminate", ["decontaminate"]),
        ("index", ["index"]),
        ("evaluate", ["evaluate", "--variant", "base", "--split", "heldout"]),
        ("start", ["bootstrap", "--variant", variant, "--seed", "0"]),
        ("trajectories", ["trajectories", *chain]),
        ("backtrace", ["backtrace", *chain]),
        ("counterfactual", ["counterfactual", *chain]),
        ("variants", ["variants", *chain]),
        ("export-trace", ["export-trace", *chain]),
        ("validate-labels", ["validate-labels"]),
    ]


def write_params(folder: Path, corpora: dict, round_questions: int, base_url: str) -> None:
    import yaml

    # The openai backend wants the served weights on local disk (training trains on them); the mock server
    # serves none and no stage here trains, so an empty folder stands in for them.
    weights = folder / "served-weights"
    weights.mkdir(exist_ok=True)
    params = {
        "corpora": {ds: info["files"] for ds, info in corpora.items()},
        "model": {"base": str(weights)},
        "index": {"scope": "pooled"},
        "llm": {"backend": "openai", "model": "mock-model", "base_urls": [base_url], "concurrency": 32},
        # at small fractions official train holds fewer questions than asked: the stages take all there
        # are (the work column says how many), as the demo does
        "trajectories": {
            "n_questions": round_questions,
            "samples": 1,
            "rationalize": True,
            "allow_fewer": True,
        },
        "evaluate": {"n_questions": HELDOUT, "allow_fewer": True},
        "counterfactual": {"max_trajectories": COUNTERFACTUAL},
        "bootstrap": {"variants": [VARIANT], "seeds": [0], "max_rounds": 1},
    }
    (folder / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _anon_rss(pid: int) -> int:
    """Bytes of a process's anonymous resident memory (its own, not file pages of the page cache)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class TreeSampler:
    """Peak RSS of a process and its descendants, sampled every ``interval_s``: all of it (mapped
    file pages included) and its anonymous part."""

    def __init__(self, pid: int, interval_s: float = 0.05):
        import psutil

        self.proc, self.interval_s, self.peak, self.peak_anon = psutil.Process(pid), interval_s, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
                total = anon = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                        anon += _anon_rss(p.pid)
                    except psutil.Error:
                        pass
                self.peak, self.peak_anon = max(self.peak, total), max(self.peak_anon, anon)
            except psutil.Error:
                return
            time.sleep(self.interval_s)

    def stop(self) -> tuple[int, int]:
        self._stop.set()
        self._thread.join()
        return self.peak, self.peak_anon


def rows_written(folder: Path, stage: str) -> int:
    import pyarrow.parquet as pq

    outputs = {
        "ingest": ["data/interim/questions.parquet", "data/interim/passages.parquet"],
        "decontaminate": ["data/interim/eval_questions.parquet"],
        "index": [],
        "evaluate": ["data/eval/base/heldout.parquet"],
        "trajectories": [f"data/trajectories/{CHAIN}.parquet"],
        "backtrace": [f"data/labels/{CHAIN}.parquet"],
        "counterfactual": [f"data/counterfactual/{CHAIN}.parquet"],
        "variants": [f"data/supervision/{CHAIN}/train.parquet"],
        "export-trace": [str(p.relative_to(folder)) for p in (folder / "data/trace").rglob("*.parquet")],
        "validate-labels": [],
    }.get(stage, [])
    return sum(pq.ParquetFile(folder / p).metadata.num_rows for p in outputs if (folder / p).exists())


def reference_cpu_s() -> float:
    """CPU seconds of a fixed pure-Python loop: how fast this machine runs right now. On a shared VM
    it drifts by tens of percent within an hour, so every stage records it beside its own CPU time
    and the report compares stages measured at different speeds by it."""
    start, total = time.process_time(), 0
    for i in range(3_000_000):
        total += i % 7
    return time.process_time() - start


def run_stage(folder: Path, args: list[str], log_path: Path) -> dict:
    env = {
        **os.environ,
        "OPENAI_API_KEY": "bench",
        "FACTORY_NO_PROGRESS": "1",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "GX_ANALYTICS_ENABLED": "false",
    }
    reference = reference_cpu_s()
    start = time.perf_counter()
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "factory.cli", *args],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        sampler = TreeSampler(proc.pid)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    peak, peak_anon = sampler.stop()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = log_path.read_text()[-3000:]
        raise RuntimeError(f"factory {' '.join(args)} failed ({proc.returncode}):\n{tail}")
    return {
        "wall_s": wall,
        "peak_rss": max(peak, usage.ru_maxrss * 1024),
        "peak_anon": peak_anon,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "reference_s": (reference + reference_cpu_s()) / 2,  # before and after the stage
    }


def work_of(folder: Path, stage: str, rows: int) -> tuple[float, str]:
    """(how much work the stage did, its unit)."""

    def metrics(name: str) -> dict:
        return json.loads((folder / "metrics" / name).read_text())

    if stage == "ingest":
        return metrics("ingest.json")["total"]["read"], "questions"
    if stage == "decontaminate":
        return metrics("decontamination.json")["total"]["checked"], "training-pool questions"
    if stage == "index":
        return metrics("ingest.json")["total"]["passages"], "passages"
    if stage == "evaluate":
        return HELDOUT, "held-out questions (fixed)"
    if stage == "counterfactual":
        return metrics(f"counterfactual/{CHAIN}.json")["reasked"], "re-asked (<= 200)"
    if stage == "start":
        return 1, "decision (fixed)"
    trajectories = rows_written(folder, "trajectories")
    return trajectories, "trajectories"


def run_size(fraction: float, out: Path, base_url: str) -> dict:
    from bench import scale_corpora

    folder = out / f"size_{fraction:g}"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "logs").mkdir(parents=True)
    t = time.perf_counter()
    corpora = scale_corpora.build(folder / "corpora", fraction)
    print(
        f"\n== {fraction:g} of the full corpora: "
        + ", ".join(f"{ds} {c['questions']:,} questions" for ds, c in corpora.items())
        + f" (written in {time.perf_counter() - t:.0f} s)",
        flush=True,
    )
    round_questions = max(50, round(ROUND_QUESTIONS_FULL * fraction))
    write_params(folder, corpora, round_questions, base_url)
    results = {}
    for stage, args in stage_commands():
        calls_before = server_calls(base_url)
        r = run_stage(folder, args, folder / "logs" / f"{stage}.log")
        r["calls"] = server_calls(base_url) - calls_before
        r["rows"] = rows_written(folder, stage)
        r["work"], r["unit"] = work_of(folder, stage, r["rows"])
        results[stage] = r
        per_call = f"{1000 * r['cpu_s'] / r['calls']:.2f} ms CPU/call" if r["calls"] else ""
        per_call += f"  (machine reference {r['reference_s']:.3f} s)"
        print(
            f"  {stage:<16} {r['wall_s']:8.1f} s  {r['peak_rss'] / GB:5.2f} GB "
            f"({r['peak_anon'] / GB:4.2f} anon)  {r['cpu_s']:8.1f} s CPU  {r['rows']:>10,} rows  "
            f"{r['calls']:>8,} calls  {per_call}",
            flush=True,
        )
    passages = json.loads((folder / "metrics/ingest.json").read_text())["total"]["passages"]
    return {
        "fraction": fraction,
        "round_questions": round_questions,
        "passages": passages,
        "questions": sum(c["questions"] for c in corpora.values()),
        "stages": results,
    }


def exponent(small: dict, large: dict, stage: str, measure: str = "wall_s") -> tuple[float | None, str]:
    """log(time ratio) / log(work ratio); against the corpus (passages) when the work is fixed."""
    a, b = small["stages"][stage], large["stages"][stage]
    if a["work"] != b["work"]:
        ratio, against = b["work"] / a["work"], "work"
    else:
        ratio, against = large["passages"] / small["passages"], "corpus"
    if ratio <= 1 or a[measure] <= 0:
        return None, against
    return math.log(b[measure] / a[measure]) / math.log(ratio), against


def report(small: dict, large: dict) -> None:
    print(
        f"\nGrowth from {small['fraction']:g} to {large['fraction']:g} of the full corpora "
        f"({small['questions']:,} -> {large['questions']:,} questions, {small['passages']:,} -> "
        f"{large['passages']:,} passages, {small['round_questions']:,} -> {large['round_questions']:,} "
        "a round)"
    )
    print(
        f"  {'stage':<16} {'work':>26} {'wall time':>17} {'exp.':>5} {'CPU exp.':>8}  "
        f"{'peak RSS (anon)':>28}  target"
    )
    worst = 0.0
    for stage in large["stages"]:
        a, b = small["stages"][stage], large["stages"][stage]
        e, against = exponent(small, large, stage)
        cpu, _ = exponent(small, large, stage, "cpu_s")
        work = f"{a['work']:,.0f} -> {b['work']:,.0f}"
        shown = ["n/a" if x is None else f"{x:.2f}" for x in (e, cpu)]
        target = "<= 1.1 in work" if against == "work" else "fixed work: vs corpus"
        print(
            f"  {stage:<16} {work:>26} {a['wall_s']:7.1f} -> {b['wall_s']:6.1f} s "
            f"{shown[0]:>5} {shown[1]:>8}  "
            f"{a['peak_rss'] / GB:5.2f} ({a['peak_anon'] / GB:4.2f}) -> {b['peak_rss'] / GB:5.2f} "
            f"({b['peak_anon'] / GB:4.2f}) GB  {target}"
        )
        worst = max(worst, b["peak_rss"])
    traj = large["stages"]["trajectories"]
    print(
        f"  factory CPU per LLM call (trajectories, {traj['calls']:,} calls): "
        f"{1000 * traj['cpu_s'] / max(traj['calls'], 1):.2f} ms (target <= 1 ms)"
    )
    drift = large["stages"]["trajectories"]["reference_s"] / small["stages"]["trajectories"]["reference_s"]
    print(
        f"  machine reference at the two sizes' trajectories stages: {drift:.2f}x as slow at the larger "
        "(a CPU exponent divided out by it: log(CPU ratio / drift) / log(work ratio))"
    )
    cpu, _ = exponent(small, large, "trajectories", "cpu_s")
    a, b = small["stages"]["trajectories"]["work"], large["stages"]["trajectories"]["work"]
    if cpu is not None and a and b and b != a:
        same_speed = cpu - math.log(drift) / math.log(b / a)
        print(f"  trajectories CPU exponent at the same machine speed: {same_speed:.2f}")
    print(f"  largest peak RSS: {worst / GB:.2f} GB (target <= 4 GB)")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=float, nargs=2, default=[0.02, 0.08], help="two fractions of the full corpora"
    )
    parser.add_argument("--full", action="store_true", help="0.25 and 1.0 of the full corpora")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "scale")
    parser.add_argument("--keep", action="store_true", help="keep the corpora and runs under --out")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=0.0, help=argparse.SUPPRESS)  # with --serve
    parser.add_argument("--capacity", type=int, help=argparse.SUPPRESS)  # with --serve
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency, args.capacity)
        return
    sizes = [0.25, 1.0] if args.full else sorted(args.sizes)
    args.out.mkdir(parents=True, exist_ok=True)
    server, base_url = start_server()
    try:
        runs = [run_size(f, args.out, base_url) for f in sizes]
    finally:
        server.terminate()
        if not args.keep:
            for f in sizes:
                shutil.rmtree(args.out / f"size_{f:g}", ignore_errors=True)
    report(*runs)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
