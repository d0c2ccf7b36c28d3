"""`factory train` end to end in a tmp dir: trained, continued, skipped, empty and refused rounds."""

from __future__ import annotations

import json

import pytest

from factory.cli import main
from factory.utils import paths
from factory.utils.io import write_json
from schemas import write_parquet

V = "backtrace"


def example(variant: str, round_: int, i: int, policy: str) -> dict:
    return {
        "example_id": f"{variant}/r{round_}/t{i}/1",
        "variant": variant,
        "round": round_,
        "trajectory_id": f"t{i}",
        "question_id": f"hotpotqa/q{i}",
        "dataset": "hotpotqa",
        "question_norm": f"which river flows through city {i}",
        "step_index": 1,
        "step_kind": "complete",
        "messages": [
            {"role": "system", "content": "You answer multi-hop questions."},
            {"role": "user", "content": f"Question: which river flows through city {i}?"},
            {"role": "assistant", "content": f"(city {i} ; river ; River {i})"},
        ],
        "units_total": 2,
        "units_kept": 1,
        "seed": 17,
        "policy": policy,
    }


def write_set(variant: str, round_: int, rows: list[dict], seed: int = 0) -> None:
    write_parquet(rows, paths.supervision_dir(variant, round_, seed) / "train.parquet", "supervision")


def decide(variant: str, after_round: int, stop: bool, seed: int = 0) -> None:
    path = (
        paths.decision(variant, after_round, seed) if after_round >= 0 else paths.init_decision(variant, seed)
    )
    write_json(path, {"stop": stop, "reason": "held-out EM has not improved (patience 1)" if stop else None})


def train(tiny_model_dir, variant: str, round_: int, *sets: str) -> int:
    args = ["train", "--variant", variant, "--round", str(round_), "--set", f"llm.model={tiny_model_dir}"]
    for s in (
        "train.max_length=128",
        "train.budget=steps",
        "train.max_steps=2",
        "train.batch_size=2",
        "train.lora_r=4",
        "train.lora_alpha=8",
        *sets,
    ):
        args += ["--set", s]
    return main(args)


def read(path) -> dict:
    return json.loads(path.read_text())


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_chain_trained_continued_skipped(workdir, tiny_model_dir):
    decide(V, -1, stop=False)
    write_set(V, 0, [example(V, 0, i, "base") for i in range(4)])
    assert train(tiny_model_dir, V, 0) == 0
    out0 = paths.adapter_dir(V, 0)
    assert read(out0 / "status.json") == {"adapter": "adapter", "reason": None, "status": "trained"}
    assert (out0 / "adapter" / "adapter_model.safetensors").exists()
    m0 = read(paths.stage_metrics("train", V, 0))
    assert m0["status"] == "trained" and m0["examples_in_set"] == m0["examples_used"] == 4
    assert m0["init_policy"] == "base" and m0["tokens_per_s"] > 0 and m0["wall_s"] > 0
    assert (m0["budget"], m0["steps"], m0["examples_seen"]) == ("steps", 2, 4) and m0["tokens_seen"] > 0
    assert read(out0 / "training_config.json")["train"]["seed"] == 31  # param seed + 1000 * protocol seed 0

    # Round 1 continues round 0's adapter on the accumulated set: only the new round's examples.
    decide(V, 0, stop=False)
    write_set(
        V,
        1,
        [example(V, 0, i, "base") for i in range(4)]
        + [example(V, 1, i, "backtrace-r0") for i in range(10, 13)],
    )
    assert train(tiny_model_dir, V, 1, "train.init=previous") == 0
    m1 = read(paths.stage_metrics("train", V, 1))
    assert m1["status"] == "trained" and m1["init_policy"] == "backtrace-r0"
    assert m1["examples_in_set"] == 7 and m1["examples_received"] == 3
    # the same two optimizer steps of full batches on a smaller set: it is cycled
    assert (m1["steps"], m1["examples_seen"]) == (2, 4) and m1["epochs"] == pytest.approx(4 / 3, abs=1e-6)
    assert read(paths.adapter_dir(V, 1) / "training_config.json")["init_adapter"] == str(out0 / "adapter")

    # The decision after round 1 stopped the chain: round 2 is skipped and leaves no adapter.
    decide(V, 1, stop=True)
    stale = paths.adapter_dir(V, 2) / "adapter"
    stale.mkdir(parents=True)
    (stale / "adapter_model.safetensors").write_bytes(b"from an earlier run")
    assert train(tiny_model_dir, V, 2) == 0
    status = read(paths.adapter_dir(V, 2) / "status.json")
    assert status["status"] == "skipped" and "patience" in status["reason"] and status["adapter"] is None
    assert not stale.exists()
    assert read(paths.stage_metrics("train", V, 2))["status"] == "skipped"


def test_empty_set_is_recorded(workdir, tiny_model_dir):
    decide("random", -1, stop=False)
    write_set("random", 0, [])
    assert train(tiny_model_dir, "random", 0) == 0
    status = read(paths.adapter_dir("random", 0) / "status.json")
    assert status["status"] == "empty" and status["adapter"] is None and "empty" in status["reason"]
    metrics = read(paths.stage_metrics("train", "random", 0))
    assert metrics["status"] == "empty" and metrics["examples_in_set"] == 0
    assert not (paths.adapter_dir("random", 0) / "adapter").exists()


@pytest.mark.parametrize("policy", ["scripted", "simulated"])
def test_scripted_and_simulated_sets_are_refused(workdir, tiny_model_dir, capsys, policy):
    decide("unfiltered", -1, stop=False)
    write_set("unfiltered", 0, [example("unfiltered", 0, 1, "base"), example("unfiltered", 0, 2, policy)])
    assert train(tiny_model_dir, "unfiltered", 0) == 1
    err = capsys.readouterr().err
    assert policy in err and "unfiltered/r0/t2/1" in err and "'policy'" in err
    assert not paths.adapter_dir("unfiltered", 0).exists()


def test_missing_inputs_say_what_to_run(workdir, tiny_model_dir, capsys):
    decide(V, -1, stop=False)
    assert train(tiny_model_dir, V, 0) == 1
    assert "factory variants --variant backtrace --round 0" in capsys.readouterr().err
    write_set(V, 0, [example(V, 0, 1, "base")])
    assert main(["train", "--variant", V, "--round", "0", "--set", "llm.model=models/nowhere"]) == 1
    assert "prepare-model" in capsys.readouterr().err
