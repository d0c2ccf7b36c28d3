"""What the train stage does around ``fit_lora`` for a round (factory/train/round.py): where the base model
is, which sets it refuses, where the adapter starts and what a round that trains nothing leaves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factory.agent.policy import Policy
from factory.params.config import Params
from factory.train.round import base_model_path, check_trainable, starting_point, write_skipped
from factory.utils.errors import FactoryError
from tests.stages.test_s10_train import example

SOURCE = Path("data/supervision/backtrace/seed_0/round_1/train.parquet")


def model_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    return path


def test_base_model_is_llm_model_on_the_local_backend(tmp_path):
    local = model_folder(tmp_path / "local")
    served = model_folder(tmp_path / "served")
    assert base_model_path(Params(llm={"model": str(local)}, model={"dir": str(served)})) == local
    # served via openai: llm.model is the served name; the weights are model.dir
    params = Params(llm={"backend": "openai", "model": "served-name"}, model={"dir": str(served)})
    assert base_model_path(params) == served


@pytest.mark.parametrize("backend", ["local", "openai"])
def test_a_missing_base_model_says_to_prepare_it(tmp_path, backend):
    folder = tmp_path / "models" / "base"
    folder.mkdir(parents=True)  # a folder without config.json is no model either
    params = Params(llm={"backend": backend, "model": str(folder)}, model={"dir": str(folder)})
    with pytest.raises(FactoryError, match=r"run `factory prepare-model` first") as err:
        base_model_path(params)
    assert f"base model folder {folder} not found" in str(err.value)


def test_a_set_of_the_variants_own_model_examples_is_trainable():
    rows = [example("backtrace", 0, 1, "base"), example("backtrace", 1, 2, "backtrace-r0")]
    assert check_trainable(rows, "backtrace", SOURCE) is None
    assert check_trainable([], "backtrace", SOURCE) is None


@pytest.mark.parametrize("policy", ["scripted", "simulated", "simulated-noisy"])
def test_scripted_and_simulated_examples_are_refused(policy):
    rows = [example("backtrace", 0, 1, "base"), example("backtrace", 0, 2, policy)]
    with pytest.raises(FactoryError) as err:
        check_trainable(rows, "backtrace", SOURCE)
    message = str(err.value)
    assert message.startswith(f"{SOURCE}: example 'backtrace/r0/t2/1' comes from the {policy!r} policy")
    assert "(field 'policy')" in message and "never trained on" in message


def test_an_example_of_another_variant_is_refused():
    rows = [example("backtrace", 0, 1, "base"), example("random", 0, 2, "base")]
    with pytest.raises(FactoryError) as err:
        check_trainable(rows, "backtrace", SOURCE)
    assert str(err.value) == (
        f"{SOURCE}: example 'random/r0/t2/1' belongs to variant 'random' (field 'variant'), not 'backtrace'"
    )


ACCUMULATED = [example("backtrace", r, i, "base") for r in (0, 1, 2) for i in range(2)]


def test_from_the_base_model_every_example_is_trained_on():
    rows, adapter, name = starting_point(ACCUMULATED, None)  # train.init: base
    assert (rows, adapter, name) == (ACCUMULATED, None, "base")
    assert rows is not ACCUMULATED
    # train.init: previous, but no round before trained an adapter: still the base model, every example
    base = Policy("base", None, -1)
    assert starting_point(ACCUMULATED, base) == (ACCUMULATED, None, "base")


def test_continuing_the_previous_policy_trains_only_the_rounds_it_has_not_seen():
    previous = Policy("backtrace-r1", Path("models/backtrace/seed_0/round_1/adapter"), 1)
    rows, adapter, name = starting_point(ACCUMULATED, previous)
    assert [r["round"] for r in rows] == [2, 2] and rows == ACCUMULATED[4:]
    assert (adapter, name) == (previous.adapter, "backtrace-r1")
    # a round after an empty one continues the last trained adapter: the skipped round's examples too
    older = Policy("backtrace-r0", Path("models/backtrace/seed_0/round_0/adapter"), 0)
    assert [r["round"] for r in starting_point(ACCUMULATED, older)[0]] == [1, 1, 2, 2]


def stale_outputs(out: Path, live: Path) -> None:
    (out / "adapter").mkdir(parents=True)
    (out / "adapter" / "adapter_model.safetensors").write_bytes(b"an earlier run")
    for name in ("status.json", "loss_curve.json", "training_config.json"):
        (out / name).write_text("{}")
    (live / "plots" / "metrics" / "train").mkdir(parents=True)
    (live / "plots" / "metrics" / "train" / "loss.tsv").write_text("step\tloss\n1\t9.0\n")


def test_a_skipped_round_leaves_its_status_and_no_adapter(tmp_path):
    out, live = tmp_path / "models" / "r2", tmp_path / "dvclive" / "r2"
    stale_outputs(out, live)
    write_skipped(out, live, "held-out EM has not improved (patience 1)")
    assert sorted(p.name for p in out.iterdir()) == ["status.json"]
    assert json.loads((out / "status.json").read_text()) == {
        "adapter": None,
        "reason": "held-out EM has not improved (patience 1)",
        "status": "skipped",
    }
    assert json.loads((live / "metrics.json").read_text()) == {"status": "skipped"}
    assert list((live / "plots" / "metrics").iterdir()) == []  # no stale curve


def test_a_skipped_round_writes_nothing_on_other_ranks(tmp_path, monkeypatch):
    out, live = tmp_path / "models" / "r2", tmp_path / "dvclive" / "r2"
    stale_outputs(out, live)
    monkeypatch.setenv("RANK", "1")  # a replica of a distributed run: rank 0 writes
    write_skipped(out, live, "a reason")
    assert (out / "adapter" / "adapter_model.safetensors").exists()
    assert (out / "status.json").read_text() == "{}" and not (live / "metrics.json").exists()
