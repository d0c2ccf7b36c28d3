import json

import pytest

from factory import paths
from factory.bootstrap.rounds import decide, policy_after, policy_for, skip_reason
from factory.errors import FactoryError


def test_improving_chain_continues_until_max_rounds():
    d = decide(0.10, [0.20], min_delta=0.0, patience=1, max_rounds=3)
    assert (d.stop, d.best_round, d.best_em) == (False, 0, 0.20)
    d = decide(0.10, [0.20, 0.30, 0.40], min_delta=0.0, patience=1, max_rounds=3)
    assert d.stop and "max_rounds" in d.reason and d.best_round == 2


def test_plateau_stops_after_patience_rounds():
    d = decide(0.10, [0.20, 0.20], min_delta=0.0, patience=1, max_rounds=5)
    assert d.stop and d.best_round == 0 and d.stale_rounds == 1 and "patience 1" in d.reason
    d = decide(0.10, [0.20, 0.20], min_delta=0.0, patience=2, max_rounds=5)
    assert not d.stop
    d = decide(0.10, [0.20, 0.20, 0.15], min_delta=0.0, patience=2, max_rounds=5)
    assert d.stop and d.best_round == 0


def test_min_delta_requires_a_real_improvement():
    d = decide(0.10, [0.12], min_delta=0.05, patience=1, max_rounds=5)
    assert d.stop and d.best_round == -1 and d.best_em == 0.10
    d = decide(0.10, [0.16], min_delta=0.05, patience=1, max_rounds=5)
    assert not d.stop and d.best_round == 0


def test_worse_than_base_keeps_base_as_best():
    d = decide(0.30, [0.10], min_delta=0.0, patience=1, max_rounds=5)
    assert d.best_round == -1 and d.stop


def test_skipped_rounds_keep_the_chain_stopped():
    d = decide(0.10, [0.20, 0.10, None], min_delta=0.0, patience=1, max_rounds=5)
    assert d.stop and d.best_round == 0


def test_chain_start_with_max_rounds_one():
    assert not decide(0.1, [], min_delta=0, patience=1, max_rounds=1).stop
    assert decide(0.1, [0.2], min_delta=0, patience=1, max_rounds=1).stop


def test_policy_resolution_falls_back_past_empty_rounds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert policy_for("backtrace", 0).name == "base"
    for r, status in enumerate(["trained", "empty"]):
        d = paths.adapter_dir("backtrace", r)
        d.mkdir(parents=True)
        (d / "status.json").write_text(json.dumps({"status": status}))
    assert policy_for("backtrace", 1).name == "backtrace-r0"
    assert policy_for("backtrace", 2).name == "backtrace-r0"  # round 1 trained nothing
    assert policy_after("backtrace", 1).adapter == paths.adapter_dir("backtrace", 0) / "adapter"
    with pytest.raises(FactoryError, match="has not been trained"):
        policy_for("backtrace", 3)


def test_skip_reason_reads_the_previous_decision(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FactoryError, match="missing"):
        skip_reason("random", 0)
    paths.init_decision("random").parent.mkdir(parents=True)
    paths.init_decision("random").write_text(json.dumps({"stop": False, "reason": None}))
    assert skip_reason("random", 0) is None
    paths.decision("random", 0).write_text(json.dumps({"stop": True, "reason": "max_rounds (1) reached"}))
    assert skip_reason("random", 1) == "max_rounds (1) reached"
