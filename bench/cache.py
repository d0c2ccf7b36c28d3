"""Response cache benchmark: the SQLite cache at the size of the full protocol.

The full protocol (docs/full-scale.md, *The full protocol*) makes at most the calls that
`factory params --profile full --cost` prints for the whole run, every one a cache entry. This fills
a cache with that many entries of a realistic size (an explore reply of ~160 characters, the
protocol's model identity), then measures what a run pays:

- size on disk (bytes per entry);
- opening it, as a resumed run starts;
- lookups of entries that are there and of ones that are not (one key at a time, as the continuous
  scheduler asks), at 1/8 of the entries and at all of them: a B-tree grows in depth with the log
  of the entries, so the time per lookup should barely move (target: <= 1.5x from 1/8 to all);
- inserts through ``ResponseCache.put_many`` as the backend makes them (one reply each, committed
  by the writer thread in group commits), in the caller's CPU per insert.

    python bench/cache.py                    # the full protocol's calls (a few minutes, a few GB of disk)
    python bench/cache.py --entries 500000
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.common import print_table  # noqa: E402 (after the sys.path line)

IDENTITY = (
    "openai:meta-llama/Llama-3.1-8B-Instruct@/models/llama-3.1-8b:ctx8192/backtrace-r1-a8a076fc+0123456789ab"
)
REPLY = "Thought: I need his birthplace.\nSufficient: no\nLook up:\n- Scott Derrickson | birthplace"


def key(i: int) -> str:
    return hashlib.sha256(f"request {i}".encode()).hexdigest()


def fill(cache, start: int, stop: int, batch: int = 20_000) -> None:
    from factory.llm.base import ChatResponse

    response = ChatResponse(text=REPLY, prompt_tokens=1400, completion_tokens=38, latency_s=0.8123)
    for s in range(start, stop, batch):
        cache.put_many([(key(i), "openai", IDENTITY, response) for i in range(s, min(stop, s + batch))])
    cache.flush()


def lookups(cache, n_entries: int, count: int = 20_000) -> tuple[float, float]:
    """(µs per hit, µs per miss), one key per call."""
    rng = random.Random(0)
    hits = [key(rng.randrange(n_entries)) for _ in range(count)]
    misses = [key(n_entries + 10_000_000 + i) for i in range(count)]
    out = []
    for keys in (hits, misses):
        t = time.perf_counter()
        for k in keys:
            cache.get(k)
        out.append(1e6 * (time.perf_counter() - t) / count)
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--entries", type=int, default=None, help="default: the full profile's calls (params --cost)"
    )
    parser.add_argument(
        "--dir", type=Path, default=None, help="where the cache file goes (default: a temp dir)"
    )
    args = parser.parse_args()
    if args.entries is None:
        from factory.bootstrap.cost import protocol_cost
        from factory.params.profiles import profile_params

        args.entries = protocol_cost(profile_params("full"))["total"]
    from factory.llm.base import ChatResponse
    from factory.llm.responses import ResponseCache

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "responses.sqlite"
        n, eighth = args.entries, args.entries // 8
        cache = ResponseCache(path)
        t = time.perf_counter()
        fill(cache, 0, eighth)
        hit_small, miss_small = lookups(cache, eighth)
        fill(cache, eighth, n)
        fill_s = time.perf_counter() - t
        cache.close()
        size = sum(os.path.getsize(p) for p in Path(tmp).iterdir())
        t = time.perf_counter()
        cache = ResponseCache(path)
        cache.get(key(0))
        open_ms = 1000 * (time.perf_counter() - t)
        hit_all, miss_all = lookups(cache, n)
        response = ChatResponse(text=REPLY, prompt_tokens=1400, completion_tokens=38, latency_s=0.8123)
        cpu, wall, inserts = time.process_time(), time.perf_counter(), 5000
        for i in range(inserts):
            cache.put_many([(key(n + i), "openai", IDENTITY, response)])
        caller_us = 1e6 * (time.process_time() - cpu) / inserts  # both threads: the writer's commits too
        cache.flush()
        committed_per_s = inserts / (time.perf_counter() - wall)
        cache.close()
    print_table(
        f"response cache, {n:,} entries",
        [
            ("size on disk", f"{size / 1e9:.2f} GB", f"{size / n:.0f} B/entry"),
            ("fill (batches of 20k)", f"{fill_s:.0f} s", f"{n / fill_s:,.0f} entries/s"),
            ("open (a resumed run)", f"{open_ms:.1f} ms", ""),
            (f"lookup hit at {eighth:,}", f"{hit_small:.1f} µs", ""),
            (f"lookup hit at {n:,}", f"{hit_all:.1f} µs", f"ratio {hit_all / hit_small:.2f} (<= 1.5)"),
            (f"lookup miss at {eighth:,}", f"{miss_small:.1f} µs", ""),
            (f"lookup miss at {n:,}", f"{miss_all:.1f} µs", f"ratio {miss_all / miss_small:.2f} (<= 1.5)"),
            ("insert, one reply a call", f"{caller_us:.0f} µs CPU", f"{committed_per_s:,.0f} committed/s"),
        ],
    )


if __name__ == "__main__":
    main()
