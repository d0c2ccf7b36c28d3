"""Helpers the benchmarks share: a free port, waiting for a server process, the figures table."""

from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_server(base_url: str, proc: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Return once ``base_url``/models answers 200; terminate ``proc`` and raise if it never does."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{base_url}/models", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.terminate()
            raise RuntimeError(f"server at {base_url} did not start")
        time.sleep(0.1)


def print_table(title: str, rows: list[tuple[str, str, str]]) -> None:
    """Rows of (figure, value, target)."""
    print(f"\n{title}")
    width = max(len(r[0]) for r in rows)
    for name, value, target in rows:
        print(f"  {name:<{width}}  {value:>14}  {target}")
