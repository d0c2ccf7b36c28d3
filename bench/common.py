"""Helpers the benchmarks share: the default corpus files, a free port, waiting for a server process,
the figures table."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_CORPORA = ROOT.parent / "shared" / "corpora"


def corpora_files(folder: str | Path | None = None) -> dict[str, list[str]]:
    """The default files of every corpus of ``factory.corpora.CORPORA`` (``Params().corpora``, written
    once in factory/params/), as absolute paths; ``folder``: a copy of ../shared/corpora to read them
    from instead."""
    from factory.corpora import CORPORA
    from factory.params.config import Params

    defaults = Params().corpora
    out = {}
    for name in CORPORA:
        files = [(ROOT / f).resolve() for f in defaults.get(name, [])]
        if folder is not None:
            files = [Path(folder) / f.relative_to(SHARED_CORPORA.resolve()) for f in files]
        out[name] = [str(f) for f in files]
    return out


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
