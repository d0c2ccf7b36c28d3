"""bench/fleet.py at a tiny size: three mock endpoints, one killed and restarted, both routings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_fleet_bench_runs_both_routings_and_every_record_is_there():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FACTORY_NO_PROGRESS": "1"}
    proc = subprocess.run(
        [sys.executable, "bench/fleet.py", "--questions", "6", "--samples", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert re.search(r"fewest_in_flight / round_robin calls/s: \d+\.\d\dx", out)
    assert len(re.findall(r"every question x sample once\s+yes", out)) == 2
    assert len(re.findall(r"calls/s / healthy capacity\s+\d\.\d{3}", out)) == 2
