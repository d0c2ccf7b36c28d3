"""Fleet benchmark: the openai backend's routing over three endpoints, one of which dies and comes back.

Three mock OpenAI-compatible endpoints run in their own processes (``bench/scale.py --serve``: replies
in the KnowTrace format, so real trajectories run), each serving at most C calls at once for a fixed
latency, so an endpoint serves at most C / latency calls/s: ``a`` and ``b`` at ``--latency``, ``slow``
at three times it. ``b`` is killed (SIGKILL: its connections drop, new ones are refused) once a third
of the run's calls have been answered and restarted on its port at two thirds. The schedule counts
answered calls, not seconds: how many calls a run makes is known beforehand (a dry run of the same
trajectories against the mock's replies in process), so both routings do the same share of their
work with ``b`` dead, however fast each goes.

The trajectories stage's driver (``generate_trajectories``, continuous scheduling) runs the same
questions x samples of the shared corpora (ingested as bench/agent_loop.py does, BM25 over their
passages) twice: ``llm.routing: fewest_in_flight`` then ``round_robin``, with ``llm.concurrency`` = 3C
(the three endpoints' slots), ``llm.concurrency_per_url`` = C, the default retries (``llm.max_retries``
5, ``llm.backoff_s`` 0.5) and the backend's own 5 s probe of an endpoint out of rotation, no response
cache (every call reaches an endpoint).

Per routing: wall time, calls answered, calls/s, calls answered and attempts sent per endpoint, failed
attempts and retries, trajectories ending in llm_error, and whether the output parquet holds every
question x sample exactly once (exit status 1 when not). Healthy capacity: the sum of C / latency over
the endpoints weighted by the time each was alive (``b`` counts 0 from its kill until its new process
answers /v1/models); the ratio calls/s / healthy capacity has the target >= 0.85 for fewest_in_flight.

The default 100 ms x 8 slots (slow: 300 ms) keeps the mock's and the client's own CPU per call (a few
ms on a loaded 2-core machine) small next to the latency; ``--latency 0.04 --capacity 4`` shows it.

    python bench/fleet.py                                  # 300 questions x 2 samples (make bench)
    python bench/fleet.py --questions 6 --samples 1        # a smoke run (tests/bench/test_fleet.py)
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.agent_loop import load_questions  # noqa: E402 (after the sys.path line)
from bench.common import free_port, print_table, wait_for_server  # noqa: E402
from factory.llm.openai_backend import OpenAILLM  # noqa: E402
from factory.params.agent_sections import LLMParams  # noqa: E402

TARGET = 0.85


class Server:
    """One mock endpoint in its own process, restartable on its port."""

    def __init__(self, name: str, latency_s: float, capacity: int):
        self.name, self.latency_s, self.capacity, self.port = name, latency_s, capacity, free_port()
        self.url, self.proc = f"http://127.0.0.1:{self.port}/v1", None

    @property
    def rate(self) -> float:
        return self.capacity / self.latency_s  # calls/s at most

    def spawn(self) -> None:
        script = str(ROOT / "bench" / "scale.py")
        cmd = [sys.executable, script, "--serve", str(self.port), "--latency", str(self.latency_s)]
        self.proc = subprocess.Popen([*cmd, "--capacity", str(self.capacity)], cwd=ROOT)

    def wait(self) -> None:
        wait_for_server(self.url, self.proc, timeout_s=60)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


class CountingLLM(OpenAILLM):
    """The openai backend, counting the attempts each endpoint answered (a 2xx reply)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.answered = Counter({u: 0 for u in self.base_urls})
        self.first_answer: dict[str, float | None] = {}  # url -> first answer after a restart

    async def _post(self, url: str, body: bytes, key: str) -> tuple[int, bytes]:
        status, raw = await super()._post(url, body, key)
        if status < 300:
            self.answered[url] += 1
            if url in self.first_answer and self.first_answer[url] is None:
                self.first_answer[url] = time.monotonic()
        return status, raw


class Outage(threading.Thread):
    """Kills ``server`` once ``llm`` has had ``kill_at`` calls answered and restarts it at ``revive_at``
    (or when the run ends first, so that the next run starts with it alive)."""

    def __init__(self, llm: CountingLLM, server: Server, kill_at: int, revive_at: int):
        super().__init__(daemon=True)
        self.llm, self.server, self.kill_at, self.revive_at = llm, server, kill_at, revive_at
        self.killed = self.spawned = self.back = None
        self.stop = threading.Event()

    def _until(self, calls: int) -> None:
        while sum(self.llm.answered.values()) < calls and not self.stop.is_set():
            time.sleep(0.005)

    def run(self) -> None:
        self._until(self.kill_at)
        if self.stop.is_set():
            return
        self.server.kill()
        self.killed = time.monotonic()
        self._until(self.revive_at)
        self.spawned = time.monotonic()
        self.server.spawn()
        self.server.wait()
        self.back = time.monotonic()
        self.llm.first_answer[self.server.url] = None


class DirectMock:
    """The mock's replies in process, counting calls: the dry run that says how many calls a run makes."""

    backend, identity = "mock", "mock-direct"

    def __init__(self):
        self.calls = 0
        nowhere = LLMParams(base_urls=["http://127.0.0.1:9/v1"], model="mock-model")  # never asked
        self.count_tokens = OpenAILLM(nowhere).count_tokens  # the backend's own count

    def generate(self, requests):
        from bench.scale import mock_reply
        from factory.llm.base import ChatResponse

        self.calls += len(requests)
        return [ChatResponse(text=mock_reply(r.message_dicts()), finish_reason="stop") for r in requests]


def generate(params, questions, retriever, llm, samples: int, out_path: Path, run_id: str) -> None:
    from factory.agent.policy import Policy
    from factory.execution.generate import generate_trajectories
    from factory.llm.base import Sampling
    from factory.utils.errors import FactoryError

    try:
        generate_trajectories(
            params,
            questions,
            llm=llm,
            retriever=retriever,
            passages=None,
            policy=Policy("base", None, -1),
            round_=0,
            samples=samples,
            sampling=Sampling(temperature=0.7, seed=0),
            out_path=out_path,
            run_id=run_id,
            desc=run_id,
        )
    except FactoryError as exc:  # the driver's own check of the records; the parquet is read below
        print(f"  {run_id}: {exc}", flush=True)


def check_records(path: Path, questions: list[dict], samples: int) -> dict:
    """Rows of the output parquet per question x sample: missing, duplicated, unexpected; llm_error."""
    import pyarrow.parquet as pq

    expected = {(q["question_id"], s) for q in questions for s in range(samples)}
    columns = ["question_id", "sample", "rationalized", "status", "error"]
    t = pq.read_table(path, columns=columns).to_pylist() if path.exists() else []
    why = Counter(r["error"] for r in t if r["status"] == "llm_error").most_common(1)
    seen = Counter((r["question_id"], r["sample"]) for r in t if not r["rationalized"])
    return {
        "rows": len(t),
        "missing": len(expected - seen.keys()),
        "duplicated": sum(n - 1 for n in seen.values() if n > 1),
        "unexpected": len(seen.keys() - expected),
        "llm_error": sum(r["status"] == "llm_error" for r in t),
        "why": f"; {why[0][1]} x {why[0][0]}" if why else "",
    }


def fleet_params(servers: list[Server], routing: str, capacity: int):
    """The stage's params: the three endpoints, 3C requests in flight, C on one, no response cache."""
    from factory.params.config import Params

    llm = {"backend": "openai", "model": "mock-model", "base_urls": [s.url for s in servers], "cache": False}
    llm |= {"concurrency": 3 * capacity, "concurrency_per_url": capacity, "routing": routing}
    return Params(llm=llm)


def run(routing: str, servers: list[Server], questions, retriever, args, planned: int) -> dict:
    params, victim = fleet_params(servers, routing, args.capacity), servers[1]
    with tempfile.TemporaryDirectory() as tmp:
        llm = CountingLLM(params.llm, registry_path=Path(tmp) / "lora_names.json")  # as make_llm builds it
        llm.identity  # noqa: B018 — asks the servers' /v1/models before the clock starts
        outage = Outage(llm, victim, planned // 3, 2 * planned // 3)
        t0 = time.monotonic()
        outage.start()
        generate(params, questions, retriever, llm, args.samples, Path(tmp) / "r.parquet", f"fleet/{routing}")
        t1 = time.monotonic()
        outage.stop.set()
        outage.join()
        r = check_records(Path(tmp) / "r.parquet", questions, args.samples)
        sent = {e.url: e.sent for e in llm._fleet.endpoints}
        llm.close()
    wall, calls, o = t1 - t0, sum(llm.answered.values()), outage
    dead = (min(o.back or t1, t1) - o.killed) if o.killed else 0.0
    alive = {s.url: wall - (dead if s is victim else 0.0) for s in servers}
    capacity = sum(s.rate * alive[s.url] for s in servers) / wall
    rel = {k: (getattr(o, k) - t0 if getattr(o, k) else None) for k in ("killed", "spawned", "back")}
    first = llm.first_answer.get(victim.url)
    return {
        **r,
        **rel,
        "wall_s": wall,
        "calls": calls,
        "planned": planned,
        "calls_per_s": calls / wall,
        "per": {s.name: (llm.answered[s.url], sent[s.url]) for s in servers},
        "busy": {s.name: llm.answered[s.url] / s.rate / max(alive[s.url], 1e-9) for s in servers},
        "failed": llm.attempts - calls,
        "retries": llm.retries,
        "again": (first - o.back) if first and o.back else None,
        "capacity": capacity,
        "ratio": calls / wall / capacity,
    }


def report(routing: str, r: dict) -> None:
    if r["killed"] is None:
        dead = "b not killed (the run ended first)"
    elif r["back"] is None or r["back"] > r["wall_s"]:
        dead = f"b killed at {r['killed']:.1f} s, back only after the run"
    else:
        again = f"served again {r['again']:.1f} s later" if r["again"] is not None else "served nothing"
        dead = (
            f"b killed at {r['killed']:.1f} s, restarted at {r['spawned']:.1f} s, answered /v1/models at "
            f"{r['back']:.1f} s, {again}"
        )
    bad = r["missing"] + r["duplicated"] + r["unexpected"]
    target = f"target >= {TARGET}" if routing == "fewest_in_flight" else "for comparison"
    rows = [
        ("wall time", f"{r['wall_s']:.1f} s", dead),
        ("calls answered", f"{r['calls']:,}", f"{r['planned']:,} planned (dry run)"),
        ("calls/s", f"{r['calls_per_s']:.1f}", f"healthy capacity {r['capacity']:.1f}/s"),
        ("calls/s / healthy capacity", f"{r['ratio']:.3f}", target),
        ("calls per endpoint", "", ", ".join(f"{n} {a:,} ({s:,} sent)" for n, (a, s) in r["per"].items())),
        ("answered / capacity while alive", "", ", ".join(f"{n} {b:.2f}" for n, b in r["busy"].items())),
        ("failed attempts / retries", f"{r['failed']} / {r['retries']}", ""),
        ("trajectories in llm_error", f"{r['llm_error']}", f"of {r['rows']:,} records{r['why']}"),
        (
            "every question x sample once",
            "NO" if bad else "yes",
            f"{r['missing']} missing, {r['duplicated']} duplicated, {r['unexpected']} unexpected",
        ),
    ]
    print_table(f"llm.routing: {routing}", rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.1, help="a and b's latency in s (slow: 3x)")
    parser.add_argument("--capacity", type=int, default=8, help="calls each endpoint serves at once (C)")
    args = parser.parse_args()
    os.environ.setdefault("FACTORY_NO_PROGRESS", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    logging.basicConfig(level=logging.WARNING, format="  [%(relativeCreated)7.0f ms] %(message)s")
    logging.getLogger("factory.llm.fleet").setLevel(logging.INFO)  # out of rotation, back in it
    from factory.retrieval.bm25 import BM25Retriever

    servers = [Server(n, args.latency * k, args.capacity) for n, k in (("a", 1), ("b", 1), ("slow", 3))]
    for s in servers:
        s.spawn()
    try:
        questions, passages = load_questions(args.questions)
        retriever = BM25Retriever.build(passages)
        for s in servers:
            s.wait()
        dry = DirectMock()
        with tempfile.TemporaryDirectory() as tmp:
            params = fleet_params(servers, "fewest_in_flight", args.capacity)
            generate(params, questions, retriever, dry, args.samples, Path(tmp) / "dry.parquet", "dry")
        shown = ", ".join(
            f"{s.name} {1000 * s.latency_s:.0f} ms x {s.capacity} ({s.rate:.0f}/s)" for s in servers
        )
        print(f"{len(questions)} questions x {args.samples} samples, {dry.calls:,} calls; endpoints {shown}")
        runs = {}
        for routing in ("fewest_in_flight", "round_robin"):
            runs[routing] = run(routing, servers, questions, retriever, args, dry.calls)
            report(routing, runs[routing])
    finally:
        for s in servers:
            if s.proc is not None and s.proc.poll() is None:
                s.kill()
    f, rr = runs["fewest_in_flight"], runs["round_robin"]
    print(
        f"\nfewest_in_flight / round_robin calls/s: {f['calls_per_s'] / rr['calls_per_s']:.2f}x "
        f"(of healthy capacity: {f['ratio']:.3f} vs {rr['ratio']:.3f}); machine load "
        f"{os.getloadavg()[0]:.1f} / {os.cpu_count()} cores"
    )
    if any(r["missing"] + r["duplicated"] + r["unexpected"] for r in runs.values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
