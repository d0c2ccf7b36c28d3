"""Progress that moves: a stage's bar of units (trajectories, examples, passages) that keeps
redrawing while one long unit runs, with what the process does meanwhile (LLM calls, tokens).

- ``Progress`` is a tqdm bar. A heartbeat thread redraws it every ``HEARTBEAT_S`` (a terminal) or
  writes a new line every ``LOG_EVERY_S`` (a log file, CI, ``dvc repro > log``), whether or not a
  unit finished: a stage that works never looks hung. When stderr is not a terminal every redraw
  is its own line (tqdm would write carriage returns, which a log shows as one endless line).
- ``work(units)`` tells the bar how much of the units in flight is done (e.g. 3.4 of a shard's 16
  trajectories, estimated from their steps): bar, percentage and ETA follow it, so the ETA moves
  inside a shard too; the count shown stays the units finished.
- ``meter`` counts what the LLM backends do in this process (calls answered, tokens generated,
  token by token on the local backend); the bar shows the counts and the token rate since it started.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass

from tqdm.auto import tqdm

HEARTBEAT_S = 1.0  # a terminal's redraw interval
LOG_EVERY_S = 10.0  # a log file's line interval


@dataclass
class Meter:
    """Work the LLM backends report (this process): calls answered and tokens generated."""

    calls: int = 0
    tokens: int = 0

    def add(self, calls: int = 0, tokens: int = 0) -> None:
        # ints under the GIL: a lost update between threads would only blur a displayed count
        self.calls += calls
        self.tokens += tokens


meter = Meter()


class _Lines:
    """A text stream where each of tqdm's carriage-return redraws becomes one line."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> None:
        text = text.replace("\x1b[A", "").strip("\r\n")
        if text.strip():
            self.stream.write(text.rsplit("\r", 1)[-1] + "\n")

    def flush(self) -> None:
        self.stream.flush()


def _count(n: float) -> str:
    return f"{n / 1000:.1f}k" if n >= 10_000 else f"{n:.0f}"


class Progress(tqdm):
    """A tqdm bar that redraws on its own, with an ETA from the work in flight and the meter's counts."""

    def __init__(self, *args, **kwargs):
        terminal = sys.stderr.isatty()
        kwargs.setdefault("file", sys.stderr if terminal else _Lines(sys.stderr))
        kwargs.setdefault("mininterval", 0.5 if terminal else LOG_EVERY_S)
        kwargs.setdefault("disable", os.environ.get("FACTORY_NO_PROGRESS") == "1")
        if not terminal:
            kwargs.setdefault("ncols", 100)
            kwargs.setdefault("ascii", True)
        else:
            kwargs.setdefault("dynamic_ncols", True)
        self._in_flight = 0.0
        self._meter_start = (meter.calls, meter.tokens)
        self._shown = not kwargs["disable"]
        super().__init__(*args, **kwargs)
        self._stop = threading.Event()
        self._beat = None
        if self._shown:
            every = HEARTBEAT_S if terminal else LOG_EVERY_S
            self._beat = threading.Thread(target=self._heartbeat, args=(every,), daemon=True)
            self._beat.start()

    def __call__(self, n: int = 1) -> None:
        """A shard's ``tick``: ``n`` units finished."""
        self.update(n)

    def update(self, n: float = 1) -> bool | None:
        self._in_flight = 0.0  # the finished units were part of what was in flight
        return super().update(n)

    def work(self, units: float) -> None:
        """How much of the unfinished units is done (in units): moves the bar and the ETA."""
        self._in_flight = max(0.0, float(units))

    def _heartbeat(self, every: float) -> None:
        while not self._stop.wait(every):
            self.refresh()

    @property
    def format_dict(self) -> dict:
        d = super().format_dict
        if not self._shown:
            return d
        done = d["n"]
        if d["total"]:
            d["n"] = min(done + self._in_flight, d["total"])
            elapsed = d["elapsed"]
            d["rate"] = (d["n"] - self.initial) / elapsed if elapsed and d["n"] > self.initial else None
        calls, tokens = meter.calls - self._meter_start[0], meter.tokens - self._meter_start[1]
        of = f"/{_count(d['total'])}" if d["total"] else ""
        shown = [f"{_count(done)}{of} {self.unit}"]
        if calls or tokens:
            rate = tokens / d["elapsed"] if d["elapsed"] else 0.0
            shown.append(f"{_count(calls)} calls, {_count(tokens)} tokens ({rate:.0f}/s)")
        d["counts"] = ", ".join(shown)
        return d

    def close(self) -> None:
        if getattr(self, "_beat", None) is not None:
            self._stop.set()
            self._beat.join()
            self._beat = None
        super().close()


BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {counts} [{elapsed}<{remaining}{postfix}]"
UNBOUNDED_FORMAT = "{desc}: {counts} [{elapsed}{postfix}]"
