"""What the round stages share (factory/stages/round.py): a round's paths, why it does not run, the
skipped branch (empty outputs, metrics with status and reason, one log line) and its metrics file."""

from __future__ import annotations

import json
import logging

import pytest

from factory.stages.round import EMPTY_TRAJECTORIES, SKIPPED, Round, empty_parquet
from factory.utils import io, paths
from factory.utils.errors import FactoryError
from schemas import read_rows, write_parquet
from tests.stages.test_s10_train import decide

V = "random"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_round_names_its_artifacts_and_its_metrics_file():
    rnd = Round("backtrace", V, 2, 1)
    assert (rnd.trajectories, rnd.labels, rnd.counterfactual) == (
        paths.trajectories(V, 2, 1),
        paths.labels(V, 2, 1),
        paths.counterfactual(V, 2, 1),
    )
    assert (rnd.supervision_dir, rnd.trace_dir) == (paths.supervision_dir(V, 2, 1), paths.trace_dir(V, 2, 1))
    assert rnd.metrics_path == paths.stage_metrics("backtrace", V, 2, 1)
    trace_metrics = paths.stage_metrics("trace", V, 2, 1)
    assert Round("export-trace", V, 2, 1, metrics_path=trace_metrics).metrics_path == trace_metrics
    assert rnd.run_id == "random/seed_1/round_2" and rnd.args == "--variant random --round 2 --seed 1"
    assert rnd.head() == {"variant": V, "round": 2, "seed": 1}
    assert rnd.head("protocol_seed", modes=["m"]) == {
        "variant": V,
        "round": 2,
        "protocol_seed": 1,
        "modes": ["m"],
    }


def test_a_missing_input_names_the_command_that_writes_it(workdir):
    rnd = Round("counterfactual", V, 1, 3)
    for call in (lambda: rnd.read(rnd.labels, "backtrace"), lambda: rnd.require(rnd.labels, "backtrace")):
        with pytest.raises(
            FactoryError, match="run `factory backtrace --variant random --round 1 --seed 3` first"
        ):
            call()
    write_parquet([], rnd.trajectories, "trajectory")
    assert (
        rnd.read(rnd.trajectories, "trajectories") == []
        and rnd.require(rnd.trajectories, "x") == rnd.trajectories
    )


def test_why_a_round_does_not_run(workdir):
    rnd = Round("trajectories", V, 1)
    with pytest.raises(FactoryError, match="run the bootstrap decision of round 0 first"):
        rnd.stop_reason()  # a stage that decides by the decision needs one
    assert rnd.recorded_stop() is None and rnd.empty_reason() == EMPTY_TRAJECTORIES
    decide(V, 0, stop=False)
    assert rnd.stop_reason() is None and rnd.empty_reason() == EMPTY_TRAJECTORIES
    decide(V, 0, stop=True)
    reason = "held-out EM has not improved (patience 1)"
    assert rnd.stop_reason() == rnd.recorded_stop() == rnd.empty_reason() == reason
    assert Round("evaluate", "base", 0).stop_reason() is None  # the base model's evaluation always runs


def test_skip_writes_empty_outputs_metrics_with_status_and_reason_and_one_line(workdir, caplog):
    rnd = Round("evaluate", V, 1, 2, metrics_path=paths.eval_metrics(V, 1, "heldout", 2), note="heldout")
    out = paths.eval_data(V, 1, "heldout", 2)
    caplog.set_level(logging.INFO, logger="factory.stages.round")
    with io.outputs_together():
        metrics = rnd.skip(
            rnd.head(split="heldout"), "max_rounds (1) reached", empty_parquet(out, "trajectory")
        )
    assert metrics == {
        "variant": V,
        "round": 1,
        "seed": 2,
        "split": "heldout",
        "status": SKIPPED,
        "reason": "max_rounds (1) reached",
    }
    assert json.loads(rnd.metrics_path.read_text()) == metrics
    assert read_rows(out) == []
    reference = workdir / "reference.parquet"  # the bytes an empty file of the contract has
    write_parquet([], reference, "trajectory")
    assert out.read_bytes() == reference.read_bytes()
    assert [r.getMessage() for r in caplog.records if r.name == "factory.stages.round"] == [
        "evaluate random round 1 (seed 2, heldout): skipped (max_rounds (1) reached)"
    ]


def test_skip_hands_the_metrics_to_the_writer_and_adds_the_stage_counts(workdir):
    rnd = Round("export-trace", V, 0, metrics_path=paths.stage_metrics("trace", V, 0))
    seen = []
    metrics = rnd.skip(
        rnd.head(), EMPTY_TRAJECTORIES, seen.append, status="empty", trajectories=0, sft_records=0
    )
    assert seen == [metrics] and metrics["status"] == "empty" and metrics["reason"] == EMPTY_TRAJECTORIES
    assert (metrics["trajectories"], metrics["sft_records"]) == (0, 0)
    assert json.loads(rnd.metrics_path.read_text()) == metrics


def test_a_skip_that_fails_writing_its_outputs_changes_nothing(workdir):
    rnd = Round("trajectories", V, 0)

    def fails(metrics):
        write_parquet([], rnd.trajectories, "trajectory")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError), io.outputs_together():
        rnd.skip(rnd.head(), "a reason", fails)
    assert not rnd.trajectories.exists() and not rnd.metrics_path.exists()


def test_write_metrics_writes_sorted_rounded_json_once_per_run(workdir):
    rnd = Round("train", V, 0)
    metrics = {"round": 0, "variant": V, "loss": 1 / 3}
    assert rnd.write_metrics(metrics) is metrics
    assert rnd.metrics_path.read_text() == '{\n  "loss": 0.333333,\n  "round": 0,\n  "variant": "random"\n}\n'
    replica = Round("train", V, 1, writes_metrics=False)  # a rank other than 0 of a distributed run
    assert replica.write_metrics(metrics) is metrics and not replica.metrics_path.exists()
