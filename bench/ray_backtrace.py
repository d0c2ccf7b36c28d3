"""The backtrace stage on 2 Ray workers against the local engine, on a round of the scale benchmark.

Runs ``factory backtrace`` in a project folder that ``bench/scale.py --keep`` left (its round 0
trajectories; by default the full size's, ``bench/out/scale/size_1``): with ``execution.engine:
local``; with ``ray`` on a cluster already up (``ray start --head --num-cpus 2``, named by
RAY_ADDRESS: how a cluster is used); and with ``ray`` on a local cluster the stage starts itself
(``execution.local_cpus: 2``, RAY_ADDRESS unset: the cluster's start-up, about 4 s, is in the time).
Prints wall time, peak RSS of the stage's process tree and the speedups (target on 2 cores: >= 1.7x),
and checks the labels are the same bytes every time.

    python bench/scale.py --full --keep        # once: the full-size round (about 15 minutes)
    python bench/ray_backtrace.py              # then this
    python bench/ray_backtrace.py --project bench/out/scale/size_0.25
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.common import free_port  # noqa: E402 (after the sys.path line)
from bench.scale import CHAIN, GB, VARIANT, run_stage  # noqa: E402

LABELS = Path(f"data/labels/{CHAIN}.parquet")
TRAJECTORIES = Path(f"data/trajectories/{CHAIN}.parquet")


def run(project: Path, engine: str, address: str | None = None) -> dict:
    args = ["backtrace", "--variant", VARIANT, "--seed", "0", "--round", "0"]
    args += ["--set", f"execution.engine={json.dumps(engine)}", "--set", "execution.local_cpus=2"]
    saved = dict(os.environ)
    os.environ.pop("RAY_ADDRESS", None)
    if address:  # `ray start` turns on token authentication (Ray >= 2.59): the driver sends the token
        os.environ.update(RAY_ADDRESS=address, RAY_AUTH_MODE="token")
    try:
        result = run_stage(project, args, project / "logs" / f"backtrace-{engine}.log")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    result["sha256"] = hashlib.sha256((project / LABELS).read_bytes()).hexdigest()
    return result


def running_cluster(project: Path) -> tuple[str, list[str]]:
    """A head node of 2 CPUs on 127.0.0.1 (its address, and the command that stops it)."""
    ray = str(Path(sys.executable).with_name("ray"))
    port = free_port()
    subprocess.run(
        [ray, "start", "--head", "--num-cpus", "2", "--port", str(port), "--include-dashboard", "false"],
        check=True,
        capture_output=True,
        cwd=project,
    )
    return f"127.0.0.1:{port}", [ray, "stop", "--force"]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--project", type=Path, default=ROOT / "bench" / "out" / "scale" / "size_1")
    args = parser.parse_args()
    if not (args.project / TRAJECTORIES).exists():
        sys.exit(f"{args.project / TRAJECTORIES} is missing: run `python bench/scale.py --full --keep` first")
    try:
        import ray  # noqa: F401
    except ImportError:
        sys.exit("the ray extra is not installed: pip install -e '.[ray]'")
    from schemas import num_rows

    trajectories = num_rows(args.project / TRAJECTORIES)
    print(f"backtrace of {trajectories:,} trajectories in {args.project}")
    runs = {"local": run(args.project, "local")}
    address, stop = running_cluster(args.project)
    try:
        runs["ray, cluster up"] = run(args.project, "ray", address)
    finally:
        subprocess.run(stop, capture_output=True)
    runs["ray, started by the stage"] = run(args.project, "ray")
    local = runs["local"]
    for name, r in runs.items():
        ratio = "" if r is local else f"  {local['wall_s'] / r['wall_s']:.2f}x (target >= 1.7x)"
        print(
            f"  {name:<26} {r['wall_s']:7.1f} s  {r['peak_rss'] / GB:5.2f} GB peak RSS (process tree){ratio}"
        )
    same = len({r["sha256"] for r in runs.values()}) == 1
    print(f"  labels the same bytes every time: {same}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
