"""The dvc.lock in git is the lock of the code in git: `dvc status` reports no stage whose code, command
or params changed since dvc.lock was written. Data dependencies and outputs are not in git (a fresh
clone has none, and ../shared may be absent): their absence is not this test's concern.

After a change to code a stage depends on, `make lock` re-runs what changed (LLM calls replayed from
the response cache of an earlier run) and this test passes again; commit dvc.lock with the code.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from factory.utils import paths
from tests.conftest import ROOT

DVC = Path(sys.executable).parent / "dvc"


def stale(status: dict, tracked: set[str]) -> list[str]:
    """'stage: what changed' for every change of a command, a param or a dependency git tracks."""
    problems = []
    for stage, entries in status.items():
        for entry in entries:
            if isinstance(entry, str):  # "changed command", "always changed"
                problems.append(f"{stage}: {entry}")
                continue
            for path, change in entry.get("changed deps", {}).items():
                if isinstance(change, dict):  # a params file: {key: modified | new | deleted}
                    problems += [f"{stage}: {path}: {key} {how}" for key, how in change.items()]
                elif path in tracked or any(t.startswith(path.rstrip("/") + "/") for t in tracked):
                    problems.append(f"{stage}: {path} {change}")
    return problems


def git_files(root: Path) -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    return set(out.splitlines())


def test_dvc_lock_is_the_lock_of_the_code_and_params_in_git():
    env = {**os.environ, "PATH": f"{DVC.parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run([str(DVC), "status", "--json"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    problems = stale(json.loads(run.stdout or "{}"), git_files(ROOT))
    assert not problems, (
        f"dvc.lock was written by other code or params ({len(problems)} changes; first: "
        + "; ".join(problems[:8])
        + "). Run `make lock` (it re-runs what changed, replaying LLM calls from data/cache) and commit "
        "dvc.lock with the code."
    )


def test_the_check_sees_code_params_and_commands_and_not_missing_data():
    status = {
        "index": [
            {
                "changed deps": {
                    "factory/retrieval": "modified",
                    "data/interim/passages.parquet": "deleted",
                    "../shared/corpora": "deleted",
                    "params.yaml": {"index": "modified"},
                }
            },
            {"changed outs": {"data/index": "not in cache"}},
        ],
        "report": ["changed command"],
        "ingest": [{"changed deps": {"data/interim/questions.parquet": "deleted"}}],
    }
    tracked = {"factory/retrieval/bm25.py", "factory/retrieval/store.py", "params.yaml"}
    assert stale(status, tracked) == [
        "index: factory/retrieval modified",
        "index: params.yaml: index modified",
        "report: changed command",
    ]


def test_every_stage_was_locked_with_the_digest_of_the_code_in_git():
    """A stage's code dep is data/code/<module>.json, which a fresh clone does not have (`dvc status`
    cannot compare it): its md5 in dvc.lock must be that of the digest the code in git gives now."""
    from factory.utils.stage_code import digest, digest_text

    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"]
    locked = {
        (stage, Path(dep["path"]).stem): dep["md5"]
        for stage, entry in lock.items()
        for dep in entry.get("deps", [])
        if dep["path"].startswith(f"{paths.CODE_DIR}/")
    }
    # every stage but stage_code and publish, whose deps are the code tree itself
    assert {stage for stage, _ in locked} == set(lock) - {"stage_code", "publish"}
    stale = sorted(
        stage
        for (stage, module), md5 in locked.items()
        if hashlib.md5(digest_text(digest(ROOT / "factory" / "stages" / f"{module}.py")).encode()).hexdigest()
        != md5
    )
    assert not stale, f"dvc.lock was written by other code for {stale}: run `make lock` and commit dvc.lock"
