"""bench/gpu.py at its tiny size on CPU: generation with the local backend and one LoRA round run, and
the figures it prints are the ones it writes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_gpu_bench_runs_tiny_on_cpu(tmp_path):
    env = {**os.environ, "FACTORY_NO_PROGRESS": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        [sys.executable, "bench/gpu.py", "--tiny", "--out", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert re.search(r"^machine: no GPU; .+, \d+ cores; torch ", out, re.M)
    figures = json.loads((tmp_path / "gpu.json").read_text())
    gen, train = figures["generation"], figures["training"]
    assert figures["device"] == "cpu" and figures["size"] == "tiny"
    assert gen["errors"] == 0 and gen["completion_tokens"] == 4 * 8  # random weights: every call to budget
    assert f"{gen['tokens_per_s']:.1f} tokens/s" in out
    assert train["steps"] == 2 and train["tokens_seen"] > 0 and train["final_loss"] > 0
    assert f"{train['step_s']:.2f} s a step" in out
    assert 32 <= train["mean_tokens_an_example"] <= 128 and train["estimated_memory_gib"] > 0
