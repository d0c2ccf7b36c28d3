"""Small file helpers: deterministic JSON/JSONL, atomic writes, progress bars."""

from __future__ import annotations

import gc
import json
import os
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


def write_text(path: str | Path, text: str) -> Path:
    """Write atomically (tmp + rename), creating parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def write_json(path: str | Path, data: Any) -> Path:
    """Metrics/report JSON: sorted keys, floats rounded to 6 digits, so reruns compare byte for byte."""
    return write_text(
        path, json.dumps(_round_floats(data), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    )


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> Path:
    return write_text(path, "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows))


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
