"""Ingest benchmark: 100,000 HotpotQA-format records, the factory's ingest vs a naive baseline.

The records are the shared HotpotQA sample re-keyed (new _id, question suffixed with its copy
number so that splits and duplicate detection see distinct questions). Both sides run in their own
subprocess in the same run, so peak RSS is measured per side:

- factory: `factory ingest` (parse, per-record checks, quarantine, passage de-duplication with
  stable pids, splits, schema validation, Great Expectations gate, parquet writes);
- baseline: json.load + pandas.DataFrame + to_parquet (nested columns made Arrow-compatible).

Prints records/s of both, their ratio (target >= 2) and the factory's peak RSS (target < 3 GB).
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
SAMPLE = ROOT.parent / "shared" / "corpora" / "hotpotqa" / "dev_sample.json"

BASELINE = r"""
import json, sys, pandas as pd
records = json.load(open(sys.argv[1]))
df = pd.DataFrame(records)
# pyarrow cannot store [title, [sentences]] pairs (mixed list); the naive fix is to restructure them
df["context"] = df["context"].map(lambda c: [{"title": t, "sentences": s} for t, s in c])
df["supporting_facts"] = df["supporting_facts"].map(lambda f: [{"title": t, "sent_idx": i} for t, i in f])
df.to_parquet(sys.argv[2])
"""


def build_records(n: int, out: Path) -> Path:
    base = json.loads(SAMPLE.read_text())
    with out.open("w") as fh:
        fh.write("[")
        for i in range(n):
            r = dict(base[i % len(base)])
            copy = i // len(base)
            r["_id"] = f"{r['_id']}-{copy}"
            r["question"] = f"{r['question']} ({copy})"
            fh.write(("," if i else "") + json.dumps(r))
        fh.write("]")
    return out


# Runs a script or module in a child and reports that child's own peak RSS on the last stderr line.
MEASURED = r"""
import resource, runpy, sys
try:
    if sys.argv[1] == "-m":
        sys.argv = sys.argv[2:]
        runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
    else:
        sys.argv = sys.argv[1:]
        runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as exc:
    if exc.code:
        raise
print("PEAK_RSS", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, file=sys.stderr)
"""


def timed(args: list[str], cwd: Path) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of a child process running ``args``."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", MEASURED, *args],
        cwd=cwd,
        env={**os.environ, "FACTORY_NO_PROGRESS": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"{' '.join(args[:3])} failed:\n{err[-2000:]}")
    return wall, int(err.strip().splitlines()[-1].split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = build_records(args.records, tmp / f"hotpot_{args.records}.json")
        size_mb = data.stat().st_size / 2**20
        print(f"input: {args.records:,} records, {size_mb:,.0f} MB")
        (tmp / "naive.py").write_text(BASELINE)
        base_s, base_rss = timed([str(tmp / "naive.py"), str(data), str(tmp / "naive.parquet")], tmp)
        corpora = f"corpora={{hotpotqa: [{data}]}}"
        fac_s, fac_rss = timed(["-m", "factory.cli", "ingest", "--set", corpora], tmp)
        counts = json.loads((tmp / "metrics" / "ingest.json").read_text())["total"]
        assert counts["ingested"] == args.records, counts
    print(f"{'':10s} {'seconds':>9s} {'records/s':>11s} {'peak RSS':>10s}")
    print(f"{'baseline':10s} {base_s:9.1f} {args.records / base_s:11,.0f} {base_rss / 2**30:9.2f}G")
    print(f"{'factory':10s} {fac_s:9.1f} {args.records / fac_s:11,.0f} {fac_rss / 2**30:9.2f}G")
    print(
        f"speed ratio factory/baseline: {base_s / fac_s:.2f}x (target >= 2); factory peak RSS "
        f"{fac_rss / 2**30:.2f} GB (target < 3)"
    )


if __name__ == "__main__":
    main()
