"""``dvc exp run --temp`` and queued experiments reach the folders outside the project (``../shared``)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from factory.utils.exps import link_outside, outside_paths

DVC = str(Path(sys.executable).parent / "dvc")
# The stage reads a folder dep above the project and a file named in params.yaml, as ingest does.
READ = (
    "import yaml; p = yaml.safe_load(open('params.yaml')); "
    "open('out.txt', 'w').write(open(p['src']).read() + p['tag'])"
)
DVC_YAML = f"""stages:
  s:
    cmd: {sys.executable} -c "{READ}"
    deps:
      - ../outside/data
    params:
      - tag
    outs:
      - out.txt
"""


def _run(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
        "DVC_NO_ANALYTICS": "1",
        # `dvc queue start` spawns its worker as `dvc` from PATH (an activated environment's)
        "PATH": f"{Path(DVC).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    if check and done.returncode:
        raise AssertionError(f"{args}: {done.stdout}\n{done.stderr}")
    return done


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "outside/data").mkdir(parents=True)
    (tmp_path / "outside/data/a.txt").write_text("corpus ")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "dvc.yaml").write_text(DVC_YAML)
    (repo / "params.yaml").write_text("src: ../outside/data/a.txt\ntag: base\n")
    _run(repo, "git", "init", "-q")
    _run(repo, DVC, "init", "-q")
    _run(repo, "git", "add", "-A")
    _run(repo, "git", "commit", "-qm", "init")
    return repo


def _out_of(repo: Path, exp: str) -> str:
    _run(repo, DVC, "exp", "apply", exp)
    return (repo / "out.txt").read_text()


def test_outside_paths_are_the_runs_paths_above_the_project(repo: Path):
    assert outside_paths(repo) == ["../outside/data", "../outside/data/a.txt"]


def test_temp_and_queued_experiments_run_with_the_links(repo: Path):
    failed = _run(repo, DVC, "exp", "run", "--temp", check=False)  # without the links: DVC's own failure
    assert failed.returncode != 0 and "No such file or directory" in failed.stderr + failed.stdout

    assert {p.relative_to(repo).as_posix() for p in link_outside(repo)} == {
        ".dvc/tmp/exps/outside",
        ".dvc/tmp/exps/standalone/outside",
    }
    assert link_outside(repo) == []  # already there: nothing renewed

    _run(repo, DVC, "exp", "run", "--temp", "-n", "tmp-one", "-S", "tag=temp")
    assert _out_of(repo, "tmp-one") == "corpus temp"

    _run(repo, DVC, "exp", "run", "--queue", "-n", "queued-one", "-S", "tag=queued")
    _run(repo, DVC, "queue", "start")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = _run(repo, DVC, "queue", "status").stdout
        if "queued-one" in status and not any(s in status for s in ("Queued", "Running")):
            break
        time.sleep(1)
    assert "Success" in status, status + _run(repo, DVC, "queue", "logs", "queued-one", check=False).stdout
    assert _out_of(repo, "queued-one") == "corpus queued"
