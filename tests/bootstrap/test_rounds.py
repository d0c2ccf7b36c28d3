import json

import pytest

from factory.bootstrap.rounds import policy_after, policy_for, skip_reason
from factory.utils import paths
from factory.utils.errors import FactoryError


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
