"""What the server serves: the base model's identity from /v1/models; adapter errors that say what to do."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import save_file

from factory.llm import make_llm
from factory.llm.base import ChatRequest, Sampling
from factory.llm.cache import CachedLLM
from factory.llm.identity import adapter_hash
from factory.llm.openai_backend import OpenAILLM
from factory.llm.responses import ResponseCache
from factory.params.config import Params
from factory.utils.errors import FactoryError
from tests.mock_openai_server import MockOpenAIServer, openai_llm


def _llm(urls, tmp_path, **kw) -> OpenAILLM:
    return openai_llm(urls, tmp_path, max_retries=1, backoff_s=0.01, **kw)


def test_identity_holds_what_the_server_says_about_the_weights(tmp_path):
    request = [ChatRequest.of([{"role": "user", "content": "q"}], Sampling())]
    with MockOpenAIServer(model_root="/srv/smollm2-135m", max_model_len=8192) as server:
        llm = _llm([server.base_url], tmp_path, model_revision="2024-11")
        assert llm.identity == "openai:mock-model@/srv/smollm2-135m:ctx8192#2024-11"
        cached = CachedLLM(llm, ResponseCache(tmp_path / "c.sqlite"))
        cached.generate(request)
        server.state.model_root = "/srv/other-weights"  # weights swapped under the same name
        swapped = CachedLLM(_llm([server.base_url], tmp_path, model_revision="2024-11"), cached.cache)
        swapped.generate(request)
        assert (cached.misses, swapped.hits, swapped.misses) == (1, 0, 1)  # no stale hit
        same = CachedLLM(_llm([server.base_url], tmp_path, model_revision="2024-11"), cached.cache)
        same.generate(request)
        assert same.hits == 1
        for x in (cached, swapped, same):
            x.inner.close()
    with MockOpenAIServer() as plain:  # llama.cpp-like: no root, no max_model_len
        assert _llm([plain.base_url], tmp_path).identity == "openai:mock-model"


def test_identity_errors_name_the_problem(tmp_path):
    with MockOpenAIServer(model_root="/a") as a, MockOpenAIServer(model_root="/b") as b:
        with pytest.raises(FactoryError, match="report different weights"):
            _ = _llm([a.base_url, b.base_url], tmp_path).identity
    with MockOpenAIServer(base_model="other") as server:
        with pytest.raises(FactoryError, match="does not serve a model named 'mock-model'.*other"):
            _ = _llm([server.base_url], tmp_path).identity


def _adapter(tmp_path):
    path = tmp_path / "models" / "backtrace" / "seed_0" / "round_0" / "adapter"
    path.mkdir(parents=True)
    save_file({"lora_A": np.ones((2, 2), dtype=np.float32)}, str(path / "adapter_model.safetensors"))
    (path / "adapter_config.json").write_text("{}")
    return path


def _params(server, **llm) -> Params:
    return Params(
        llm={
            "backend": "openai",
            "base_urls": [server.base_url],
            "model": "mock-model",
            "max_retries": 1,
            "backoff_s": 0.01,
            "cache": False,
            **llm,
        }
    )


def test_a_server_without_runtime_adapters_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    adapter = _adapter(tmp_path)
    name = f"backtrace-r0-{adapter_hash(adapter)[:8]}"
    with MockOpenAIServer(lora_endpoint=False) as server:  # llama.cpp's server: 404
        with pytest.raises(FactoryError) as err:
            make_llm(_params(server), adapter_path=adapter, adapter_name="backtrace-r0")
    message = str(err.value)
    assert f"/v1/load_lora_adapter: could not load LoRA adapter '{name}': HTTP 404" in message
    assert "--enable-lora" in message and "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True" in message
    assert "llm.load_lora: false" in message and f"--lora-modules {name}={adapter}" in message
    assert "no such endpoint" in message and "lora_path_prefix" not in message  # not a path problem


def test_a_vllm_without_enable_lora_is_told_apart_from_a_missing_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    adapter = _adapter(tmp_path)
    with MockOpenAIServer(lora_enabled=False) as server:  # the route is there, --enable-lora is not
        with pytest.raises(FactoryError) as err:
            make_llm(_params(server), adapter_path=adapter, adapter_name="backtrace-r0")
    message = str(err.value)
    assert "HTTP 400" in message and "LoRA is not enabled" in message and "--enable-lora" in message
    assert "no adapter at" not in message and "lora_path_prefix" not in message


def test_adapter_paths_are_absolute_by_default(tmp_path, monkeypatch):
    """A server resolves lora_path against its own working directory: the factory sends absolute paths."""
    project, elsewhere = tmp_path / "project", tmp_path / "server-cwd"
    project.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(project)
    adapter = _adapter(project)
    relative = adapter.relative_to(project)  # models/backtrace/seed_0/round_0/adapter, as the stages pass it
    with MockOpenAIServer(lora_cwd=elsewhere) as server:
        llm = make_llm(_params(server), adapter_path=relative, adapter_name="backtrace-r0")
        assert list(server.state.adapters.values()) == [str(adapter.resolve())]
        assert llm.generate([ChatRequest.of([{"role": "user", "content": "q"}], Sampling())])[0].ok
        llm.close()


def test_a_path_the_server_cannot_see_names_the_path_and_the_prefix(tmp_path, monkeypatch):
    project, elsewhere = tmp_path / "project", tmp_path / "server-cwd"
    project.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(project)
    adapter = _adapter(project)
    relative = str(adapter.relative_to(project))
    with MockOpenAIServer(lora_cwd=elsewhere) as server:
        llm = _llm([server.base_url], tmp_path)
        with pytest.raises(FactoryError) as err:  # what the factory used to send: a relative path
            llm.load_adapter("backtrace-r0-rel", adapter, server_path=relative)
        message = str(err.value)
        assert "HTTP 404" in message and f"no adapter at the path it was sent, {relative!r}" in message
        assert f"No adapter found for {relative}" in message  # the server's own answer, quoted
        assert "relative path" in message and "llm.lora_path_prefix" in message
        assert "cannot load adapters at run time" not in message
        # a prefix naming a mount the server does not have: the same diagnosis, with that path
        params = _params(server, lora_path_prefix="/mnt/nowhere/models")
        with pytest.raises(FactoryError, match="no adapter at the path it was sent, '/mnt/nowhere/models/"):
            make_llm(params, adapter_path=relative, adapter_name="backtrace-r0")
        assert server.state.adapters == {}
        llm.close()


def test_adapters_registered_at_server_start(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    adapter = _adapter(tmp_path)
    name = f"backtrace-r0-{adapter_hash(adapter)[:8]}"
    with MockOpenAIServer(lora_endpoint=False) as server:
        params = _params(server, load_lora=False, lora_path_prefix="/srv/models")
        with pytest.raises(FactoryError, match=f"--lora-modules {name}=/srv/models/backtrace/seed_0/round_0"):
            make_llm(params, adapter_path=adapter, adapter_name="backtrace-r0")
        server.state.adapters[name] = (
            "/srv/models/backtrace/seed_0/round_0/adapter"  # --lora-modules at start
        )
        llm = make_llm(params, adapter_path=adapter, adapter_name="backtrace-r0")
        assert llm.generate([ChatRequest.of([{"role": "user", "content": "q"}], Sampling())])[0].ok
        llm.close()
        assert server.chat_records()[-1]["body"]["model"] == name
        assert not [r for r in server.records if r["path"].endswith("/load_lora_adapter")]
