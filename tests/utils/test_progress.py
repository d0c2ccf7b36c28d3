"""Progress that moves: heartbeat lines in a log, the ETA inside a long unit, the LLM meter's counts."""

from __future__ import annotations

import time

import pytest

from factory.utils import progress as progress_mod
from factory.utils.io import progress


@pytest.fixture
def fast_log(monkeypatch):
    monkeypatch.setattr(progress_mod, "LOG_EVERY_S", 0.05)
    monkeypatch.delenv("FACTORY_NO_PROGRESS", raising=False)


def _lines(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert "\r" not in err  # a log gets whole lines, never carriage-return redraws
    return [line for line in err.split("\n") if line]


def test_a_unit_that_takes_long_still_writes_lines(fast_log, capsys):
    with progress(total=4, desc="trajectories", unit="traj"):
        time.sleep(1.2)  # no unit finishes
    lines = _lines(capsys)
    assert len(lines) >= 10, lines
    assert all(line.startswith("trajectories:") and "0/4 traj" in line for line in lines)
    assert {line.rsplit("[", 1)[1] for line in lines[:-1]} != {lines[0].rsplit("[", 1)[1]}  # time moves


def test_work_in_flight_moves_the_bar_and_the_eta(fast_log, capsys):
    with progress(total=4, desc="t", unit="traj") as bar:
        time.sleep(0.06)
        bar.work(2.0)  # half of the (unfinished) units done
        time.sleep(0.12)
        last_in_flight = _lines(capsys)[-1]
        bar(1)  # a unit finished: it was part of the work in flight
        after_tick = bar.format_dict
    assert " 50%|" in last_in_flight and "0/4 traj" in last_in_flight and "<00:" in last_in_flight
    assert after_tick["n"] == 1 and "1/4 traj" in after_tick["counts"]


def test_the_meter_counts_calls_and_tokens_since_the_bar_began(fast_log, capsys):
    progress_mod.meter.add(calls=5, tokens=500)  # before the bar: not its work
    with progress(total=2, desc="evaluate", unit="traj"):
        progress_mod.meter.add(calls=2, tokens=30)
        time.sleep(0.12)
    assert "2 calls, 30 tokens" in _lines(capsys)[-1]


def test_a_bar_without_a_total_counts(fast_log, capsys):
    with progress(desc="ingest", unit="rec") as bar:
        bar.update(1200)
        time.sleep(0.08)
    assert "ingest: 1200 rec" in _lines(capsys)[-1]


def test_switched_off(monkeypatch, capsys):
    monkeypatch.setenv("FACTORY_NO_PROGRESS", "1")
    with progress(total=3, desc="x") as bar:
        bar(3)
    assert capsys.readouterr().err == ""
