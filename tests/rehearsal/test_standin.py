"""The served path rehearsed small: round 0 from the base model, an adapter trained, registered by name
and absolute path on the stand-in server (its own process and working directory, as vLLM runs elsewhere),
round 1 generated under the adapter's name. `make rehearse` runs the same through the pipeline."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from factory.llm import make_llm
from factory.llm.base import ChatRequest, Sampling
from factory.llm.local import LocalLLM
from factory.params.agent_sections import LLMParams
from factory.params.config import Params
from factory.params.round_sections import TrainParams
from factory.train.lora import fit_lora
from factory.utils.errors import FactoryError

ROOT = Path(__file__).resolve().parents[2]
QUESTION = [{"role": "user", "content": "Question: which river flows through the city? Answer:"}]
EXAMPLES = [
    {
        "example_id": f"ex-{i}",
        "messages": [
            {"role": "user", "content": f"Question: which river flows through city {i}? Answer:"},
            {"role": "assistant", "content": "Thought: the river | flows through ; Answer: the Rhine"},
        ],
    }
    for i in range(8)
]
# a learning rate high enough that the adapter changes the greedy reply (so applying it shows)
TRAIN = TrainParams(max_length=96, max_steps=6, batch_size=4, lora_r=4, lora_alpha=8, learning_rate=0.05)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def standin(tiny_model_dir, tmp_path):
    """The stand-in serving the tiny model as 'tiny', started in its own cwd; yields (url, its log file)."""
    cwd, port = tmp_path / "server-cwd", _free_port()
    cwd.mkdir()
    log = tmp_path / "server.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "factory.rehearsal.standin_server",
        "--model",
        str(tiny_model_dir),
        "--served-model-name",
        "tiny",
        "--port",
        str(port),
        "--log",
        str(log),
    ]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the stand-in server did not start: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.2)
    yield url, log
    proc.terminate()
    proc.wait(timeout=10)


def _params(url: str, tiny_model_dir: Path) -> Params:
    return Params(
        llm={"backend": "openai", "base_urls": [url], "model": "tiny", "cache": False, "max_retries": 0},
        model={"dir": str(tiny_model_dir)},  # the tokenizer the openai backend counts tokens with
    )


def _ask(llm) -> str:
    (resp,) = llm.generate([ChatRequest.of(QUESTION, Sampling(max_new_tokens=12))])
    assert resp.ok, resp.error
    return resp.text


def test_round_0_train_and_round_1_under_the_adapter_name_through_the_standin(
    standin, tiny_model_dir, tmp_path, monkeypatch
):
    url, server_log = standin
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)  # the factory's folder is not the server's
    params = _params(url, tiny_model_dir)
    base = make_llm(params)  # round 0: the base model
    base_text = _ask(base)
    base.close()
    round_dir = Path("models/backtrace/seed_0/round_0")
    assert fit_lora(EXAMPLES, tiny_model_dir, round_dir, TRAIN).metrics["status"] == "trained"

    policy = make_llm(params, adapter_path=round_dir / "adapter", adapter_name="backtrace-r0")  # relative
    served = policy.served_model
    adapter_text = _ask(policy)  # round 1: under the adapter's name
    policy.close()
    listed = {m["id"]: m for m in httpx.get(f"{url}/models").json()["data"]}
    assert listed[served]["root"] == str((project / round_dir / "adapter").resolve())
    assert listed[served]["parent"] == "tiny"
    # the adapter is applied: the stand-in's reply is the local backend's with that adapter, not the base's
    local = LocalLLM(LLMParams(model=str(tiny_model_dir)), project / round_dir / "adapter")
    assert adapter_text == _ask(local) != base_text
    local.close()

    text = server_log.read_text()
    assert f"adapter loaded: name {served}, path {(project / round_dir / 'adapter').resolve()}" in text
    assert "chat request: model tiny" in text and f"chat request: model {served}" in text
    # the old relative path is refused as vLLM refuses it (resolved against the server's cwd)
    with pytest.raises(FactoryError, match="No adapter found for models/backtrace/seed_0/round_0/adapter"):
        policy.load_adapter(
            "backtrace-r0-relative", round_dir / "adapter", server_path=str(round_dir / "adapter")
        )
    unknown = httpx.post(f"{url}/chat/completions", json={"model": "nope", "messages": QUESTION})
    assert unknown.status_code == 404 and "does not exist" in unknown.text
