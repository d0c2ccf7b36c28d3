"""Running a stage as DVC does (its own process) and killing it with SIGKILL at a chosen moment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def run_stage(
    args: list[str], cwd: Path, kill_when: Callable[[], bool] | None = None, timeout_s: float = 300
):
    """Run ``factory <args>`` in ``cwd``; with ``kill_when``, SIGKILL it the moment that turns true.
    Returns True when it was killed, False when it finished (a failure raises)."""
    env = {**os.environ, "FACTORY_NO_PROGRESS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "factory.cli", *args], cwd=cwd, env=env, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        if kill_when is not None and kill_when():
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        if time.monotonic() > deadline:
            proc.kill()
            raise TimeoutError(f"factory {' '.join(args)} took over {timeout_s} s")
        time.sleep(0.005)
    err = proc.stderr.read()
    if proc.returncode != 0:
        raise AssertionError(f"factory {' '.join(args)} failed ({proc.returncode}):\n{err[-2000:]}")
    return False


def files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path (hidden ones included)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
