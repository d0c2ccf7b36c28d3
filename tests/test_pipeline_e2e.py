"""The whole DVC pipeline in a temporary copy of the project, with the tiny test model.

The tiny model (random weights) never answers correctly, so every round's supervision set is
empty and training records ``empty``; held-out EM stays at the base model's, so the stop rule
ends every chain after round 1 (patience 2) and the third round slot records ``skipped``. The
report and the published (empty) sets are produced, and a second ``dvc repro`` does nothing.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from factory.params.config import Params
from factory.params.profiles import render_current
from factory.variants import registry

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _copy_project(dst: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("factory", "schemas", "validators"):
        shutil.copytree(ROOT / name, dst / name, ignore=ignore)
    shutil.copy(ROOT / "dvc.yaml", dst / "dvc.yaml")


def _params(tiny_model_dir: Path) -> Params:
    p = Params()
    overrides = {
        "model": {"base": str(tiny_model_dir)},
        "ingest": {"max_per_dataset": 20},  # per dataset and official split: 20 train, 20 dev
        "splits": {"heldout": 0.2},  # about 8 of the 40 official train questions: 3 are evaluated
        "llm": {"max_new_tokens": 16, "batch_size": 16},
        "agent": {"max_iterations": 2, "repair_attempts": 0},
        "trajectories": {"n_questions": 6, "shard_size": 6},
        "evaluate": {"n_questions": 3},
        "routes": {"n_questions": 2},
        "simulate": {"n_questions": 4, "noise_levels": [0.0, 1.0]},
        "relevance": {"bootstrap_samples": 20, "random_seeds": 2},
        "train": {"budget": "steps", "max_steps": 2, "max_length": 128},
        "bootstrap": {"max_rounds": 2, "patience": 2},
    }
    data = p.model_dump(mode="json")
    for section, values in overrides.items():
        data[section].update(values)
    return Params.model_validate(data)


def _dvc(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "FACTORY_NO_PROGRESS": "1",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        # stages import the copied package, not the shared editable install (which may be another checkout)
        "PYTHONPATH": os.pathsep.join(p for p in (str(cwd), os.environ.get("PYTHONPATH")) if p),
    }
    return subprocess.run(
        [str(Path(sys.executable).parent / "dvc"), *args], cwd=cwd, env=env, capture_output=True, text=True
    )


def _git(args: list[str], cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True)


def _ok(run: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


def _another_machine_gets_the_run(work: Path, repo: Path) -> None:
    """docs/full-scale.md#another-machine-gets-a-run, as written there: every output and the response
    cache's snapshot go to a DVC remote (a local folder here) with the commit, all but the base model
    (`push: false`); a second clone pulls them, `dvc repro` re-makes only the base model, `dvc status` is
    clean, and an LLM stage forced to run again is answered from the cache that came along (no call, the
    same bytes)."""
    _ok(_dvc(["remote", "add", "-d", "store", str(work / "remote")], repo))
    _ok(_dvc(["add", "data/cache"], repo))
    _git(["add", "-A"], repo)
    _git(["commit", "-q", "-m", "a run"], repo)
    _ok(_dvc(["push"], repo))

    clone = work / "clone"  # beside the first, so that ../shared/corpora is the same folder
    _git(["clone", "-q", str(repo), str(clone)], work)
    _ok(_dvc(["pull", "--allow-missing"], clone))
    assert not (clone / "models/base").exists()  # push: false: the base model never went to the remote
    ran = re.findall(r"Running stage '([^']+)'", _ok(_dvc(["repro"], clone)).stdout)
    assert ran == ["prepare_model"]  # re-made from model.base, to the same bytes: nothing after it runs
    assert json.loads(_ok(_dvc(["status", "--json"], clone)).stdout or "{}") == {}
    assert (clone / "data/cache/responses.sqlite").exists()
    _ok(_dvc(["repro", "--force", "--single-item", "trajectories@backtrace-0-r0"], clone))
    done = "data/trajectories/backtrace/seed_0/round_0.parquet"
    assert (clone / done).read_bytes() == (repo / done).read_bytes()
    cache = json.loads((clone / "metrics/trajectories/backtrace/seed_0/round_0.json").read_text())["cache"]
    assert cache["misses"] == 0 and cache["hits"] > 0  # the local model's replies, unusable ones too


def test_dvc_pipeline_end_to_end(tmp_path, tiny_model_dir, corpora):
    work = tmp_path / "work"
    repo = work / "repo"
    repo.mkdir(parents=True)
    (work / "shared").symlink_to(corpora.parent)  # dvc.yaml reads ../shared/corpora
    _copy_project(repo)
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    (repo / "params.yaml").write_text(render_current(_params(tiny_model_dir)))
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    assert _dvc(["init", "-q"], repo).returncode == 0

    first = _dvc(["repro"], repo)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]

    for variant in ("backtrace", "random", "unfiltered"):
        for r in (0, 1):
            status = json.loads((repo / f"models/{variant}/seed_0/round_{r}/status.json").read_text())
            assert status["status"] == "empty"  # no correct trajectory: a recorded outcome, not a crash
            assert (
                json.loads((repo / f"metrics/eval/{variant}/seed_0/round_{r}_heldout.json").read_text())[
                    "status"
                ]
                == "done"
            )
        skipped = json.loads((repo / f"metrics/trajectories/{variant}/seed_0/round_2.json").read_text())
        assert skipped["status"] == "skipped" and "patience" in skipped["reason"]
        final = json.loads((repo / f"metrics/bootstrap/{variant}.json").read_text())
        assert final["chains"]["0"]["selected_round"] == -1  # the base model stayed best
        card = (repo / f"data/published/{variant}/README.md").read_text()
        assert yaml.safe_load(card.split("---")[1])["license"]
        # every decision records the paired test of its round: the policy after an empty round is the
        # base model, so its held-out answers equal the base model's, question by question
        for r in (0, 1):
            decision = repo / f"metrics/bootstrap/{variant}/seed_0/round_{r}.json"
            test = json.loads(decision.read_text())["test"]
            assert (test["against"], test["difference"], test["ci"], test["n"]) == (-1, 0.0, [0.0, 0.0], 3)
            assert test["improved"] is False
    report = (repo / "reports/bootstrap.md").read_text()
    # every chain selected the base model, so the test split cannot tell the variants apart
    verdicts = report.split("## Verdict\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert verdicts == [
        f"- {registry.variant(other).question} backtrace vs {other}: CANNOT TELL on this run, the interval "
        "includes 0 (test EM difference +0.000, 95% CI [+0.000, +0.000] over 3 questions)."
        for other in ("random", "unfiltered")
    ]
    assert "Training budget: equal compute, 2 optimizer steps of 8 x 1 examples per round" in report
    assert (
        "- seed 0, round 1: held-out EM 0.000 vs the base model 0.000: difference +0.000, 95% CI "
        "[+0.000, +0.000] over 3 questions -> no gain; stop (held-out EM has not risen" in report
    )
    summary = json.loads((repo / "metrics/summary.json").read_text())
    assert set(summary["variants"]) == {"backtrace", "random", "unfiltered"}
    assert set(summary["verdicts"]) == {"backtrace_vs_random", "backtrace_vs_unfiltered"}
    assert (repo / "reports/relevance.md").exists() and (repo / "reports/backtrace_sensitivity.md").exists()

    second = _dvc(["repro"], repo)
    assert second.returncode == 0
    assert "Running stage" not in second.stdout, second.stdout[-2000:]
    status = _dvc(["status", "--json"], repo)
    assert json.loads(status.stdout or "{}") == {}
    _another_machine_gets_the_run(work, repo)

    # one more round allowed (what `dvc exp run -S bootstrap.max_rounds=3` does): the stop decisions
    # are re-taken, but as patience already stopped every chain nothing is generated or trained again
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["bootstrap"]["max_rounds"] = 3
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    third = _dvc(["repro"], repo)
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    ran = {line.split("'")[1] for line in third.stdout.splitlines() if line.startswith("Running stage")}
    assert ran and {name.split("@")[0] for name in ran} <= {
        "start",
        "decide",
        "select",
        "report",
        "publish",
        "plots",
    }, sorted(ran)
