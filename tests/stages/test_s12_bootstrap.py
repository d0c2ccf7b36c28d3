"""`factory bootstrap`: the stop decision read from the per-question evaluation files, written with its
paired test; chain start, a skipped round, missing or mismatched evaluations."""

from __future__ import annotations

import json

import pytest

from factory.cli import main
from factory.utils import paths
from tests.bootstrap.evals import em, write_eval

V = "backtrace"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_eval(paths.base_eval_data("heldout"), paths.base_eval_metrics("heldout"), em("110000000000"))
    return tmp_path


def evaluated(round_: int, scores, seed: int = 0) -> None:
    write_eval(
        paths.eval_data(V, round_, "heldout", seed), paths.eval_metrics(V, round_, "heldout", seed), scores
    )


def decide(*args: str) -> int:
    return main(["bootstrap", "--variant", V, *args])


def read(path) -> dict:
    return json.loads(path.read_text())


def test_chain_start_round_decisions_and_a_skipped_round(workdir):
    assert decide() == 0
    init = read(paths.init_decision(V))
    assert (
        init["stop"] is False and init["base_em"] == pytest.approx(2 / 12, abs=1e-6) and init["test"] is None
    )
    assert read(paths.adapter_dir(V, 0).parent / "init" / "status.json")["status"] == "base"

    evaluated(0, em("111111111100"))  # a clear gain over the base model
    assert decide("--round", "0") == 0
    d0 = read(paths.decision(V, 0))
    assert d0["test"]["improved"] and d0["test"]["against"] == -1 and d0["test"]["ci"][0] > 0
    assert (d0["best_round"], d0["stop"]) == (0, False)

    evaluated(1, em("111111111110"))  # one more question: inside the noise
    assert decide("--round", "1", "--set", "bootstrap.patience=1") == 0
    d1 = read(paths.decision(V, 1))
    assert d1["test"]["against"] == 0 and d1["test"]["difference"] == pytest.approx(1 / 12, abs=1e-6)
    assert d1["test"]["ci"][0] == 0.0 and not d1["test"]["improved"] and d1["best_round"] == 0
    assert d1["stop"] and "patience 1" in d1["reason"]
    assert [t["digest"] for t in d1["tests"]][0] == d0["test"]["digest"]

    evaluated(2, None)  # skipped after the stop
    assert decide("--round", "2", "--set", "bootstrap.patience=1") == 0
    d2 = read(paths.decision(V, 2))
    assert d2["tests"][2] is None and d2["history"][2] is None and d2["stop"] and d2["best_round"] == 0

    # the threshold test counts the one-question rise
    assert (
        decide("--round", "1", "--set", "bootstrap.stop_test=threshold", "--set", "bootstrap.patience=1") == 0
    )
    assert read(paths.decision(V, 1))["best_round"] == 1


def test_missing_or_mismatched_evaluations_are_clear_errors(workdir, capsys):
    assert decide("--round", "0") == 1
    assert "round_0_heldout.json is missing: evaluate that policy" in capsys.readouterr().err
    evaluated(0, em("1111"))
    assert decide("--round", "0") == 1
    assert "different held-out questions" in capsys.readouterr().err
