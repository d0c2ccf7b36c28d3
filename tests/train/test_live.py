"""DVCLive curves of a training round: what dvc plots and dvc exp show read, offline and deterministic."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from factory.params.round_sections import TrainParams
from factory.train import live
from factory.train.lora import fit_lora
from tests.train.test_lora import EXAMPLES

PARAMS = TrainParams(max_length=128, budget="steps", max_steps=3, batch_size=2, lora_r=4, lora_alpha=8)
CURVES = {f"{name}.tsv" for name in live.STEP_METRICS}


def _rows(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_a_trained_round_logs_every_step_and_a_summary(tmp_path, tiny_model_dir):
    live_dir = tmp_path / "dvclive" / "round_0"
    metrics = fit_lora(EXAMPLES, tiny_model_dir, tmp_path / "model", PARAMS, live_dir=live_dir).metrics
    curves = live_dir / "plots" / "metrics" / "train"
    assert {p.name for p in curves.iterdir()} == CURVES
    loss = _rows(curves / "loss.tsv")
    assert [r["step"] for r in loss] == ["1", "2", "3"]  # the Trainer's optimizer steps
    recorded = json.loads((tmp_path / "model" / "loss_curve.json").read_text())
    assert [float(r["loss"]) for r in loss] == pytest.approx([p["loss"] for p in recorded])
    tokens = [int(float(r["tokens_seen"])) for r in _rows(curves / "tokens_seen.tsv")]
    assert tokens == sorted(tokens) and tokens[-1] == metrics["tokens_seen"]  # cumulative
    assert all(float(r["grad_norm"]) > 0 for r in _rows(curves / "grad_norm.tsv"))
    summary = json.loads((live_dir / "metrics.json").read_text())
    assert summary["status"] == "trained" and summary["step"] == 3
    assert summary["train"]["loss"] == pytest.approx(recorded[-1]["loss"])
    assert summary["train"]["tokens_seen"] == metrics["tokens_seen"]
    # params.train of the round, without the Trainer's scratch folder (which changes every run)
    assert yaml.safe_load((live_dir / "params.yaml").read_text())["max_steps"] == 3
    assert "factory-train-" not in (live_dir / "params.yaml").read_text()
    assert "timestamp" not in (curves / "loss.tsv").read_text()


def test_an_untrained_round_leaves_its_status_and_no_curve(tmp_path, tiny_model_dir):
    live_dir = tmp_path / "live"
    (live_dir / "plots" / "metrics" / "train").mkdir(parents=True)
    (live_dir / "plots" / "metrics" / "train" / "loss.tsv").write_text("step\tloss\n1\t9.0\n")  # stale
    fit_lora([], tiny_model_dir, tmp_path / "model", PARAMS, live_dir=live_dir)
    assert json.loads((live_dir / "metrics.json").read_text()) == {"status": "empty"}
    assert list((live_dir / "plots" / "metrics").iterdir()) == []


def test_dvclive_never_opens_a_repository_nor_posts_to_studio(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)  # a git repo without DVC, no commit
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVC_STUDIO_TOKEN", "isat_not_a_real_token")

    def refuse(*args, **kwargs):
        raise AssertionError("DVCLive tried to post to Studio")

    monkeypatch.setattr("dvclive.studio.post_live_metrics", refuse)
    with live.offline_live("dvclive/r") as lv:
        lv.log_metric("train/loss", 1.0)
        lv.next_step()
    assert not (tmp_path / ".dvc").exists()  # left to itself DVCLive would `dvc init` this repo
    assert not (tmp_path / "dvc.yaml").exists()
    assert json.loads((tmp_path / "dvclive/r/metrics.json").read_text())["train"]["loss"] == 1.0


STAGE = """\
import sys
from factory.params.round_sections import TrainParams
from factory.train.lora import fit_lora
from tests.train.test_lora import EXAMPLES
import yaml
lr = yaml.safe_load(open("params.yaml"))["train"]["learning_rate"]
params = TrainParams(max_length=128, budget="steps", max_steps=4, batch_size=2, lora_r=4, lora_alpha=8,
                     learning_rate=lr)
fit_lora(EXAMPLES, sys.argv[1], "models/r0", params, live_dir="dvclive/r0")
"""

DVC_YAML = {
    "stages": {
        "train": {
            "cmd": "{python} train.py {model}",
            "deps": ["train.py"],
            "params": ["train.learning_rate"],
            "outs": ["models/r0"],
            "metrics": [{"dvclive/r0/metrics.json": {"cache": False}}],
            "plots": [{"dvclive/r0/plots/metrics": {"cache": False, "x": "step"}}],
        }
    }
}


@pytest.mark.slow
def test_two_dvc_exp_runs_compare_in_exp_show_and_plots_diff(tmp_path, tiny_model_dir):
    """`dvc exp run -S` twice, then `dvc exp show --only-changed` and `dvc plots diff` of the two."""
    root = Path(__file__).resolve().parents[2]
    dvc = str(Path(sys.executable).parent / "dvc")
    env = {
        **os.environ,
        "PYTHONPATH": str(root),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "OMP_NUM_THREADS": "1",
        "FACTORY_NO_PROGRESS": "1",
        "DVC_NO_ANALYTICS": "1",
    }

    def sh(*args):
        done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout

    (tmp_path / "train.py").write_text(STAGE)
    yaml_text = yaml.safe_dump(DVC_YAML).replace("{model}", str(tiny_model_dir))
    yaml_text = yaml_text.replace("{python}", sys.executable)
    (tmp_path / "dvc.yaml").write_text(yaml_text)
    (tmp_path / "params.yaml").write_text("train:\n  learning_rate: 0.0002\n")
    (tmp_path / ".gitignore").write_text("/models/\n")  # dvclive/ stays visible to git: exp run saves it
    sh("git", "init", "-q")
    sh(dvc, "init", "-q")
    sh(dvc, "config", "core.analytics", "false")
    sh("git", "add", "-A")
    sh("git", "commit", "-qm", "baseline")
    for lr in ("0.001", "0.02"):
        sh(dvc, "exp", "run", "-q", "-S", f"train.learning_rate={lr}")
    table = json.loads(sh(dvc, "exp", "show", "--only-changed", "--json"))
    exps = {e["name"]: e["data"] for row in table for e in (row.get("experiments") or []) for e in e["revs"]}
    assert len(exps) == 2
    lrs, losses = {}, {}
    for name, data in exps.items():
        lrs[name] = data["params"]["params.yaml"]["data"]["train"]["learning_rate"]
        m = data["metrics"]["dvclive/r0/metrics.json"]["data"]
        losses[name] = m["train"]["loss"]
        assert m["train"]["learning_rate"] > 0 and m["status"] == "trained"
    assert sorted(lrs.values()) == [0.001, 0.02]
    assert len(set(losses.values())) == 2  # different learning rates, different final losses
    plots = json.loads(sh(dvc, "plots", "diff", *exps, "--json"))
    loss = plots["data"]["dvclive/r0/plots/metrics/train/loss.tsv"][0]
    assert sorted(loss["revisions"]) == sorted(exps)
    assert {row["rev"] for row in loss["content"]["data"]["values"]} == set(exps)
