"""execution.engine: ray on a local two-CPU cluster started by the tests: the bytes of the local engine,
a repeated run that makes no call, a worker killed mid-shard, a driver killed and restarted, and an
unreachable RAY_ADDRESS. Skipped, with the reason, when the ``ray`` extra is not installed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from factory.agent.scripted import ScriptedPolicyLLM
from factory.cli import main
from factory.execution.shards import shard_folder
from factory.params.config import Params
from factory.utils import paths
from schemas import read_rows
from tests.execution.test_scheduler import scripted_script
from tests.mock_openai_server import MockOpenAIServer
from tests.stages.test_s05_trajectories import make_project, start_chain

ROOT = Path(__file__).resolve().parents[2]
N = 24  # training questions of the round
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]  # one cluster, one xdist worker


@pytest.fixture(scope="module")
def cluster():
    """A Ray cluster of one head node with 2 CPUs on 127.0.0.1; RAY_ADDRESS names it for every driver."""
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
    import ray
    from ray.cluster_utils import Cluster

    head = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    saved = os.environ.get("RAY_ADDRESS")
    os.environ["RAY_ADDRESS"] = head.address
    try:
        yield head
    finally:
        ray.shutdown()
        head.shutdown()
        if saved is None:
            os.environ.pop("RAY_ADDRESS", None)
        else:
            os.environ["RAY_ADDRESS"] = saved


@pytest.fixture
def project(tmp_path, monkeypatch, ingested):
    monkeypatch.chdir(tmp_path)
    questions = make_project(tmp_path, ingested, train=N, heldout=1)
    start_chain(tmp_path, "backtrace")
    (tmp_path / "served").mkdir()
    return questions


def argv(base_url: str, engine: str) -> list[str]:
    sets = {
        "llm.backend": "openai",
        "llm.base_urls": [base_url],
        "llm.model": "mock-model",
        "model.base": "served",  # the served weights, local: what a stage on the openai backend needs
        "llm.concurrency": 4,
        "llm.backoff_s": 0.01,
        "trajectories.n_questions": N,
        "trajectories.samples": 2,
        "execution.engine": engine,
        "execution.shard_size": 4,
    }
    out = ["trajectories", "--variant", "backtrace", "--round", "0"]
    for k, v in sets.items():
        out += ["--set", f"{k}={json.dumps(v)}"]
    return out


def metrics(root: Path) -> dict:
    return json.loads((root / paths.stage_metrics("trajectories", "backtrace", 0)).read_text())


def check_complete(out: Path) -> None:
    rows = read_rows(out, ["question_id", "sample", "status"])
    keys = [(r["question_id"], r["sample"]) for r in rows]
    assert len(keys) == 2 * N and len(set(keys)) == 2 * N  # every question x sample once
    assert all(r["status"] == "ok" for r in rows)


def test_ray_writes_the_bytes_of_local_and_a_repeated_run_makes_no_call(cluster, project, tmp_path):
    out = tmp_path / paths.trajectories("backtrace", 0)
    with MockOpenAIServer(script=scripted_script(ScriptedPolicyLLM(project)), record=False) as server:
        assert main(argv(server.base_url, "local")) == 0
        local = out.read_bytes()
        sent = server.state.completions
        calls = sum(metrics(tmp_path)["cache"].values())  # a call repeated within the run is a hit already
        out.unlink()
        assert main(argv(server.base_url, "ray")) == 0  # the cluster's workers, the same cache
        assert server.state.completions == sent  # every reply came from the cache through its actor
        assert out.read_bytes() == local
        assert metrics(tmp_path)["cache"] == {"hits": calls, "misses": 0}
        shutil.rmtree(tmp_path / paths.CACHE_DIR)
        out.unlink()
        assert main(argv(server.base_url, "ray")) == 0  # a fresh cache: the workers call and store
        # (a shard retried after its worker died may ask again what was in flight when it died)
        after_ray = server.state.completions
        assert after_ray >= 2 * sent
        out.unlink()
        assert main(argv(server.base_url, "local")) == 0  # ... and the driver's file holds their replies
        assert server.state.completions == after_ray
    check_complete(out)
    assert not shard_folder(out).exists()


def test_backtrace_and_counterfactual_on_ray_write_the_bytes_of_local(
    cluster, project, tmp_path, monkeypatch
):
    import factory.backtrace.tasks

    out = tmp_path / paths.trajectories("backtrace", 0)
    server = MockOpenAIServer(script=scripted_script(ScriptedPolicyLLM(project)), record=False).__enter__()
    try:
        assert main(argv(server.base_url, "local")) == 0
        check_complete(out)
        _labels_and_counterfactual(tmp_path, monkeypatch, factory.backtrace.tasks, server)
    finally:
        server.__exit__(None, None, None)


def _labels_and_counterfactual(tmp_path, monkeypatch, tasks, server):
    monkeypatch.setattr(tasks, "TASK_ROWS", 5)  # 10 tasks over the cluster's 2 CPUs
    labels = tmp_path / paths.labels("backtrace", 0)
    bt = ["backtrace", "--variant", "backtrace", "--round", "0"]
    assert main(bt) == 0
    local = labels.read_bytes()
    labels.unlink()
    assert main([*bt, "--set", 'execution.engine="ray"']) == 0
    assert labels.read_bytes() == local
    assert len(read_rows(labels, ["trajectory_id"])) == 2 * N * len(Params().backtrace.modes) * len(
        Params().backtrace.target_modes
    )
    rows = tmp_path / paths.counterfactual("backtrace", 0)
    cf = ["counterfactual", "--variant", "backtrace", "--round", "0", *argv(server.base_url, "local")[5:]]
    cf += ["--set", "counterfactual.shard_size=3"]
    assert main(cf) == 0
    local, sent = rows.read_bytes(), server.state.completions
    assert len(read_rows(rows, ["trajectory_id"])) > 0
    rows.unlink()
    assert main([*cf, "--set", 'execution.engine="ray"']) == 0
    assert rows.read_bytes() == local and server.state.completions == sent  # every reply from the cache


def _shard_workers() -> list[int]:
    """Pids of the Ray workers running a shard now (Ray titles them after the task)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"ray::_run_shard" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _driver(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FACTORY_NO_PROGRESS": "1"}
    return subprocess.Popen([sys.executable, "-m", "factory.cli", *args], cwd=cwd, env=env)


def _wait_for(what, child: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not what():
        assert child.poll() is None, "the run ended before the fault could be injected"
        assert time.monotonic() < deadline, "timed out waiting to inject the fault"
        time.sleep(0.02)


def _done_shards(out: Path) -> int:
    return len(list(shard_folder(out).glob("shard_*.parquet")))


def test_a_worker_killed_mid_shard_costs_only_that_shards_retry(cluster, project, tmp_path):
    out = tmp_path / paths.trajectories("backtrace", 0)
    script = scripted_script(ScriptedPolicyLLM(project))
    with MockOpenAIServer(script=script, latency_s=0.03, record=False) as server:
        child = _driver(argv(server.base_url, "ray"), tmp_path)
        _wait_for(lambda: _done_shards(out) >= 1 and _shard_workers(), child)
        victim = _shard_workers()[0]
        os.kill(victim, signal.SIGKILL)  # a worker dies in the middle of its shard
        assert child.wait(timeout=240) == 0
        ray_bytes = out.read_bytes()
        sent = server.state.completions
        out.unlink()
        assert main(argv(server.base_url, "local")) == 0  # every reply the cluster got is cached
        assert server.state.completions == sent
    assert out.read_bytes() == ray_bytes  # no record lost or duplicated: the bytes of a local run
    check_complete(out)


def test_a_killed_driver_resumes_from_its_journal(cluster, project, tmp_path, caplog):
    out = tmp_path / paths.trajectories("backtrace", 0)
    script = scripted_script(ScriptedPolicyLLM(project))
    with MockOpenAIServer(script=script, latency_s=0.03, record=False) as server:
        child = _driver(argv(server.base_url, "ray"), tmp_path)
        _wait_for(lambda: _done_shards(out) >= 2, child)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        kept = _done_shards(out)
        assert not out.exists() and kept >= 2
        with caplog.at_level("INFO"):
            assert main(argv(server.base_url, "ray")) == 0
        assert f"{kept} of {N // 4} shards already done" in caplog.text
        resumed = out.read_bytes()
        sent = server.state.completions
        out.unlink()
        assert main(argv(server.base_url, "local")) == 0
        assert server.state.completions == sent
    assert out.read_bytes() == resumed
    check_complete(out)


def test_an_unreachable_cluster_is_one_line_naming_ray_address_before_any_call(
    project, monkeypatch, capsys, unused_port
):
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{unused_port}")
    with MockOpenAIServer(script=lambda m, model: "", record=False) as server:
        assert main(argv(server.base_url, "ray")) != 0
        assert server.state.completions == 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("factory ")]
    assert len(err) == 1 and f"RAY_ADDRESS=127.0.0.1:{unused_port}" in err[0], err


def test_without_the_extra_the_engine_says_how_to_install_it(project, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if it were not installed
    with MockOpenAIServer(script=lambda m, model: "", record=False) as server:
        assert main(argv(server.base_url, "ray")) != 0
        assert server.state.completions == 0
    assert "pip install -e '.[ray]'" in capsys.readouterr().err


@pytest.fixture
def unused_port() -> int:
    from bench.common import free_port

    return free_port()
