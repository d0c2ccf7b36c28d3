"""Small file helpers: atomic writes of files and folders, deterministic JSON/JSONL, progress bars."""

from __future__ import annotations

import gc
import glob
import json
import os
import shutil
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm


def _round_floats(value: Any, digits: int = 6) -> Any:
    if isinstance(value, float):
        return round(value, digits)
    if isinstance(value, dict):
        return {k: _round_floats(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_round_floats(v, digits) for v in value]
    return value


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A hidden temporary path next to ``path`` (``.<name>.tmp-<pid>``) to write a file or a folder
    into; when the block ends without an error it takes the place of ``path`` by rename, and on an
    error it is removed. A process killed at any moment therefore leaves the old output or none,
    never a partial one under the real name; the temporaries a killed writer left are removed here,
    on the next write of the same path. A folder replaces an old one in two renames (old aside, new
    in): killed between them, the path is missing, never half-written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for kind in ("tmp", "old"):
        for stale in path.parent.glob(f".{glob.escape(path.name)}.{kind}-*"):
            _remove(stale)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
    except BaseException:
        _remove(tmp)
        raise
    if tmp.is_dir() and path.is_dir():
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        os.replace(path, old)
        os.replace(tmp, path)
        _remove(old)
    else:
        os.replace(tmp, path)


def write_text(path: str | Path, text: str) -> Path:
    """Write atomically (tmp + rename), creating parent folders."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_json(path: str | Path, data: Any) -> Path:
    """Metrics/report JSON: sorted keys, floats rounded to 6 digits, so reruns compare byte for byte."""
    return write_text(
        path, json.dumps(_round_floats(data), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    )


def jsonl_line(row: dict) -> str:
    """One JSONL line: sorted keys, UTF-8 as is."""
    return json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n"


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> Path:
    """One JSON object per line, streamed to the temporary file and renamed when whole."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(jsonl_line(r))
    return Path(path)


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read_jsonl(path: str | Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while building millions of small objects that form no
    cycles (parsed records, rows): its full collections otherwise dominate ingest time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def progress(
    iterable: Iterable | None = None,
    total: int | None = None,
    desc: str = "",
    unit: str = "it",
    initial: int = 0,
):
    """A progress bar with counts, rate and ETA on stderr (plain lines when not a terminal)."""
    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        initial=initial,
        file=sys.stderr,
        dynamic_ncols=True,
        mininterval=0.5 if sys.stderr.isatty() else 10.0,
        disable=os.environ.get("FACTORY_NO_PROGRESS") == "1",
    )
