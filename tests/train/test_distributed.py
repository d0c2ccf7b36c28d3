"""`factory train` under torchrun: two processes (gloo on CPU, the tiny model) against one process with
twice the batch -- one adapter, written by rank 0 alone; the same steps, examples and loss curve."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from transformers import AutoModelForCausalLM

from factory.cli import main
from factory.train.model import load_adapter_model, load_tokenizer
from factory.utils import paths
from tests.stages.test_s10_train import decide, example, write_set

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (dist.is_available() and dist.is_gloo_available()),
        reason="torch.distributed with the gloo backend is not available in this torch build",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
V = "backtrace"
STEPS, BATCH, ACCUM, WORLD = 3, 2, 2, 2
# What the process writes to disk under the project folder, as Python's audit hooks see it: files opened
# for writing, renames, removals and folders made. Each rank keeps its list and dumps it at exit
# (outside the project folder); then it runs `python -m factory.cli`, the command docs/full-scale.md gives.
LAUNCH = """\
import atexit, json, os, runpy, sys

project, log_dir = (os.path.realpath(a) for a in sys.argv[1:3])
del sys.argv[1:3]
writes, recording = [], [True]
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

def hook(event, args):
    if not recording[0]:
        return
    if event == "open":
        path, mode, flags = args
        if not (set(mode or "") & set("wax+") or (mode is None and flags & WRITE_FLAGS)):
            return
        targets = [path]
    elif event in ("os.remove", "os.rmdir", "os.mkdir", "os.truncate", "shutil.rmtree"):
        targets = [args[0]]
    elif event == "os.rename":
        targets = [args[1]]
    else:
        return
    for t in targets:
        if isinstance(t, int):
            continue
        t = os.path.realpath(os.fsdecode(t))
        if t.startswith(project + os.sep):
            writes.append([event, os.path.relpath(t, project)])

def dump():
    recording[0] = False
    with open(os.path.join(log_dir, f"rank_{os.environ['RANK']}.json"), "w") as f:
        json.dump(writes, f)

sys.addaudithook(hook)
atexit.register(dump)
runpy.run_module("factory.cli", run_name="__main__", alter_sys=True)
"""


def train_args(model: Path, batch_size: int) -> list[str]:
    args = ["train", "--variant", V, "--round", "0", "--set", f"llm.model={model}"]
    for s in (
        "train.max_length=128",
        "train.budget=steps",
        f"train.max_steps={STEPS}",
        f"train.batch_size={batch_size}",
        f"train.grad_accum={ACCUM}",
        "train.lora_r=4",
        "train.lora_alpha=8",
        "train.learning_rate=0.005",  # the loss moves visibly in three steps
        # no dropout: every process draws its masks from the same seed, one process draws them for its
        # whole batch, so with dropout the two curves would differ by their masks
        "train.lora_dropout=0.0",
    ):
        args += ["--set", s]
    return args


def project(root: Path, monkeypatch) -> Path:
    """A project folder holding what the train stage reads: round 0's set (6 examples) and the chain's
    initial decision."""
    root.mkdir()
    monkeypatch.chdir(root)
    decide(V, -1, stop=False)
    write_set(V, 0, [example(V, 0, i, "base") for i in range(6)])
    return root


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def read(path: Path):
    return json.loads(path.read_text())


def tsv_steps(path: Path) -> list[int]:
    with path.open() as f:
        return [int(r["step"]) for r in csv.DictReader(f, delimiter="\t")]


def logits(model, tok) -> torch.Tensor:
    ids = tok("Question: which river flows through city 3?", return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        return model(**ids).logits


def test_torchrun_two_processes_train_like_one_with_twice_the_batch(tmp_path, tiny_model_dir, monkeypatch):
    ddp = project(tmp_path / "ddp", monkeypatch)
    adapter = paths.adapter_dir(V, 0) / "adapter"
    (ddp / adapter).mkdir(parents=True)  # an earlier run's adapter: rank 0 removes it, nobody else
    (ddp / adapter / "adapter_model.safetensors").write_bytes(b"stale")
    (tmp_path / "launch.py").write_text(LAUNCH)
    (tmp_path / "writes").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"RANK", "LOCAL_RANK", "WORLD_SIZE"}}
    env.update(
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        OMP_NUM_THREADS="1",  # one thread per process: two processes on two cores
        TOKENIZERS_PARALLELISM="false",
        FACTORY_NO_PROGRESS="1",
    )
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={WORLD}"]
    done = subprocess.run(  # `python -m torch.distributed.run` is `torchrun`, without looking it up in PATH
        [*launch, str(tmp_path / "launch.py"), str(ddp), str(tmp_path / "writes")]
        + train_args(tiny_model_dir, BATCH),
        cwd=ddp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]

    # The same round in one process with twice the batch (in this process, on one thread).
    single = project(tmp_path / "single", monkeypatch)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(train_args(tiny_model_dir, WORLD * BATCH)) == 0
    finally:
        torch.set_num_threads(threads)

    m2, m1 = read(ddp / paths.stage_metrics("train", V, 0)), read(single / paths.stage_metrics("train", V, 0))
    assert (m2["world_size"], m1["world_size"]) == (WORLD, 1)
    assert m2["status"] == m1["status"] == "trained"
    # the step budget counts the processes: the same optimizer steps of the same examples
    assert m2["steps"] == m1["steps"] == STEPS
    assert m2["examples_seen"] == m1["examples_seen"] == STEPS * BATCH * ACCUM * WORLD
    for key in ("epochs", "tokens_seen", "assistant_tokens_seen", "examples_used"):
        assert m2[key] == m1[key], key

    # the loss curve has every step, the same as one process's (same examples, same order)
    curve2 = read(ddp / paths.adapter_dir(V, 0) / "loss_curve.json")
    curve1 = read(single / paths.adapter_dir(V, 0) / "loss_curve.json")
    assert [p["step"] for p in curve2] == [p["step"] for p in curve1] == list(range(1, STEPS + 1))
    assert [p["loss"] for p in curve2] == pytest.approx([p["loss"] for p in curve1], rel=1e-5)
    assert [p["lr"] for p in curve2] == pytest.approx([p["lr"] for p in curve1])
    assert curve2[-1]["loss"] < curve2[0]["loss"]
    live_loss = paths.live_dir(V, 0) / "plots" / "metrics" / "train" / "loss.tsv"
    assert tsv_steps(ddp / live_loss) == list(range(1, STEPS + 1))

    # One adapter folder, rank 0's (the stale one gone), the same files as one process writes in all
    assert [p.relative_to(ddp) for p in ddp.rglob("adapter") if p.is_dir()] == [adapter]
    assert (ddp / adapter / "adapter_model.safetensors").read_bytes() != b"stale"
    assert files(ddp) == files(single)
    assert read(ddp / paths.adapter_dir(V, 0) / "status.json")["status"] == "trained"
    # it loads, and it is one process's adapter up to float rounding (training moved the logits by ~0.25)
    tok = load_tokenizer(tiny_model_dir)
    trained2 = logits(load_adapter_model(tiny_model_dir, ddp / adapter), tok)
    trained1 = logits(load_adapter_model(tiny_model_dir, single / adapter), tok)
    base = logits(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir), dtype=torch.float32).eval(), tok)
    assert torch.allclose(trained2, trained1, atol=1e-4, rtol=0)
    assert (trained2 - base).abs().max() > 1e-2

    # Only rank 0 wrote under the project folder, each of the factory's files once (written whole, then
    # renamed into its folder's temporary; the folders renamed into place with the metrics); rank 1 did
    # not as much as make a folder.
    writes = {r: read(tmp_path / "writes" / f"rank_{r}.json") for r in range(WORLD)}
    assert writes[1] == []
    renamed = [path for event, path in writes[0] if event == "os.rename"]
    for out in (paths.stage_metrics("train", V, 0), paths.adapter_dir(V, 0), paths.live_dir(V, 0)):
        assert renamed.count(str(out)) == 1, out
    for name in ("loss_curve.json", "status.json", "training_config.json"):
        inside = [
            p for p in renamed if Path(p).name == name and Path(p).parent.name.startswith(".round_0.tmp-")
        ]
        assert len(inside) == 1, name
    assert any(
        Path(path).name == "adapter_config.json" and "/.round_0.tmp-" in path
        for event, path in writes[0]
        if event == "open"
    )
    # and only rank 0 logged progress: the stage's summary line appears once
    assert output.count("INFO factory.train.lora: train: 6 examples") == 1, output[-4000:]
