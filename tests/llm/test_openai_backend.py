"""The OpenAI-compatible backend against the mock server: faults, retries, concurrency, adapters, secrets."""

from __future__ import annotations

import json
import logging
from collections import defaultdict

import pytest

from factory.llm.base import ChatRequest, Sampling
from factory.llm.openai_backend import OpenAILLM, request_seed
from factory.utils.errors import FactoryError
from tests.mock_openai_server import TRANSIENT, FaultPlan, MockOpenAIServer, echo_script, openai_llm

KEY_ENV = "FACTORY_TEST_OPENAI_KEY"


def _requests(n: int, sampling: Sampling | None = None) -> list[ChatRequest]:
    sampling = sampling or Sampling(max_new_tokens=32)
    return [
        ChatRequest.of([{"role": "user", "content": f"question {i}"}], sampling, sample=i % 3)
        for i in range(n)
    ]


def _llm(server: MockOpenAIServer, tmp_path, **kw) -> OpenAILLM:
    opts = {"api_key_env": KEY_ENV, "concurrency": 8, "timeout_s": 0.5, "max_retries": 4, "backoff_s": 0.01}
    return openai_llm([server.base_url, server.base_url], tmp_path, **opts | kw)


def _safetensors(path, value: float) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    path.mkdir(parents=True, exist_ok=True)
    save_file({"lora_A": np.full((2, 2), value, dtype=np.float32)}, str(path / "adapter_model.safetensors"))
    (path / "adapter_config.json").write_text("{}")


def test_faults_retried_one_response_per_request(tmp_path):
    plan = FaultPlan(rate=0.3, seed=3, permanent_rate=0.06, hang_s=3.0)
    with MockOpenAIServer(faults=plan) as server:
        llm = _llm(server, tmp_path)
        requests = _requests(48)
        out = llm.generate(requests)
        llm.close()
        chats = server.chat_records()
    assert len(out) == len(requests)
    by_prompt = defaultdict(list)
    for rec in chats:
        by_prompt[rec["body"]["messages"][-1]["content"]].append(rec)
    faulted = [r for r in chats if r["fault"]]
    assert len(faulted) >= 0.2 * len(chats), "the plan should inject ~30% faults"
    outcomes = defaultdict(int)
    for i, (_, resp) in enumerate(zip(requests, out)):
        prompt = f"question {i}"
        attempts = sorted(by_prompt[prompt], key=lambda r: r["attempt"])
        assert [a["attempt"] for a in attempts] == list(range(len(attempts)))  # no duplicate sends
        final = attempts[-1]["fault"]
        expected_text = echo_script([{"role": "user", "content": prompt}], "mock-model")
        if plan.permanent(attempts[0]["key"]):
            assert not resp.ok and resp.error.startswith("HTTP 500 after 4 retries"), resp.error
            assert len(attempts) == 5
            outcomes["permanent"] += 1
            continue
        assert resp.ok, (prompt, resp.error, [a["fault"] for a in attempts])
        assert all(a["fault"] in TRANSIENT and a["fault"] != "latency" for a in attempts[:-1])
        if final == "truncated":
            assert (
                resp.finish_reason == "length"
                and expected_text.startswith(resp.text)
                and resp.text != expected_text
            )
        else:  # an empty completion is a transient fault: retried as the same request, never accepted
            assert resp.text == expected_text and resp.finish_reason == "stop"
        outcomes["retried" if len(attempts) > 1 else "first"] += 1
    assert outcomes["permanent"] >= 1 and outcomes["retried"] >= 5 and outcomes["first"] >= 10


def test_concurrency_bound_and_request_fields(tmp_path):
    with MockOpenAIServer(latency_s=0.05) as server:
        llm = _llm(server, tmp_path, concurrency=5)
        sampling = Sampling(temperature=0.7, top_p=0.9, max_new_tokens=21, seed=4, stop=("\n\n", "Question:"))
        out = llm.generate(_requests(40, sampling))
        llm.close()
        assert all(r.ok for r in out)
        assert 2 <= server.state.max_in_flight <= 5
        body = server.chat_records()[0]["body"]
    assert body["model"] == "mock-model" and body["temperature"] == 0.7 and body["top_p"] == 0.9
    assert body["max_tokens"] == 21 and body["stop"] == ["\n\n", "Question:"]
    i = int(body["messages"][0]["content"].split()[-1])
    assert body["seed"] == request_seed(4, i % 3)


def test_client_errors_are_not_retried(tmp_path):
    with MockOpenAIServer() as server:
        llm = openai_llm(
            [server.base_url],
            tmp_path,
            model="no-such-model",
            api_key_env=KEY_ENV,
            max_retries=4,
            backoff_s=0.01,
        )
        (resp,) = llm.generate(_requests(1))
        llm.close()
        assert len(server.chat_records()) == 1
    assert not resp.ok and resp.error.startswith("HTTP 404, not retried")


def test_unreachable_server_gives_error_responses(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = openai_llm(
        [f"http://127.0.0.1:{port}/v1"],
        tmp_path,
        model="m",
        api_key_env=KEY_ENV,
        max_retries=2,
        backoff_s=0.01,
    )
    out = llm.generate(_requests(3))
    llm.close()
    assert [r.error.split(" (")[0] for r in out] == ["connection error after 2 retries"] * 3


def test_round_robin_over_base_urls(tmp_path):
    with MockOpenAIServer() as a, MockOpenAIServer() as b:
        llm = openai_llm([a.base_url, b.base_url], tmp_path, api_key_env=KEY_ENV)
        assert all(r.ok for r in llm.generate(_requests(10)))
        llm.close()
        assert len(a.chat_records()) == len(b.chat_records()) == 5


def test_load_adapter_registers_name_and_refuses_reuse(tmp_path):
    first, second = (
        tmp_path / "models" / "bt" / "round_1" / "adapter",
        tmp_path / "models" / "bt" / "round_2" / "adapter",
    )
    _safetensors(first, 1.0)
    _safetensors(second, 2.0)
    with MockOpenAIServer() as server:
        llm = _llm(server, tmp_path)
        llm.load_adapter("backtrace-r1", first, server_path="/srv/bt/round_1/adapter")
        assert server.state.adapters == {"backtrace-r1": "/srv/bt/round_1/adapter"}
        loads = [r for r in server.records if r["path"].endswith("/load_lora_adapter")]
        assert (
            len(loads) == 2
        )  # once per base_url (both point at this server: the 2nd answers "already loaded")
        (resp,) = llm.generate(_requests(1))
        assert resp.ok and server.chat_records()[-1]["body"]["model"] == "backtrace-r1"
        registry = json.loads((tmp_path / "lora_names.json").read_text())
        assert llm.identity == f"openai:mock-model/backtrace-r1+{registry['backtrace-r1'][:12]}"
        llm.load_adapter("backtrace-r1", first)  # same name, same weights: no-op
        assert len([r for r in server.records if r["path"].endswith("/load_lora_adapter")]) == 2
        with pytest.raises(FactoryError, match="never re-used"):
            llm.load_adapter("backtrace-r1", second)
        other = _llm(server, tmp_path)  # another process: the registry file remembers the name
        with pytest.raises(FactoryError, match="already registered"):
            other.load_adapter("backtrace-r1", second)
        other.load_adapter("backtrace-r2", second)
        assert other.identity != llm.identity and set(server.state.adapters) == {
            "backtrace-r1",
            "backtrace-r2",
        }
        llm.close()
        other.close()


def test_make_llm_openai_prefix_and_errors(tmp_path, monkeypatch):
    from factory.llm import make_llm
    from factory.llm.cache import CachedLLM
    from factory.llm.identity import adapter_hash
    from factory.params.config import Params

    monkeypatch.chdir(tmp_path)
    adapter = tmp_path / "models" / "backtrace" / "seed_0" / "round_1" / "adapter"
    _safetensors(adapter, 3.0)
    params = Params()
    params.llm.backend = "openai"
    with pytest.raises(FactoryError, match="base_urls"):
        make_llm(params)
    with MockOpenAIServer() as server:
        params.llm.base_urls = [server.base_url]
        params.llm.model = "mock-model"
        params.llm.lora_path_prefix = "/mnt/shared/models"
        params.llm.api_key_env = KEY_ENV
        llm = make_llm(
            params, adapter_path="models/backtrace/seed_0/round_1/adapter", adapter_name="backtrace-r1"
        )
        served = f"backtrace-r1-{adapter_hash(adapter)[:8]}"  # the weights' hash in the name
        assert isinstance(llm, CachedLLM) and llm.identity.startswith(f"openai:mock-model/{served}+")
        assert server.state.adapters == {served: "/mnt/shared/models/backtrace/seed_0/round_1/adapter"}
        assert llm.generate(_requests(2))[0].ok
        assert server.chat_records()[-1]["body"]["model"] == served
        llm.close()
        _safetensors(adapter, 4.0)  # the round retrained: a new name, not a refused re-use
        retrained = make_llm(
            params, adapter_path="models/backtrace/seed_0/round_1/adapter", adapter_name="backtrace-r1"
        )
        assert len(server.state.adapters) == 2 and served not in retrained.identity
        retrained.close()
        with pytest.raises(FactoryError, match="adapter_name"):
            make_llm(params, adapter_path=adapter)


def test_api_key_only_in_authorization_header(tmp_path, monkeypatch, caplog):
    from factory.llm.cache import CachedLLM
    from factory.llm.responses import ResponseCache

    secret = "sk-test-9f1c2e7d4b6a8c0e-unique"
    monkeypatch.setenv(KEY_ENV, secret)
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG)
    adapter = tmp_path / "models" / "a" / "adapter"
    _safetensors(adapter, 1.0)
    with MockOpenAIServer(faults=FaultPlan(rate=0.3, seed=1, permanent_rate=0.1, hang_s=2.0)) as server:
        inner = _llm(server, tmp_path)
        inner.load_adapter("a-r1", adapter)
        llm = CachedLLM(inner, ResponseCache(tmp_path / "data" / "cache" / "responses.sqlite"))
        out = llm.generate(_requests(30))
        llm.close()
        records = list(server.records)
    assert any(r.error for r in out) and any(r.ok for r in out)
    assert all(r["headers"].get("authorization") == f"Bearer {secret}" for r in records)
    for r in records:
        others = {k: v for k, v in r["headers"].items() if k != "authorization"}
        assert secret not in json.dumps(others) and secret not in json.dumps(r["body"])
    assert secret not in llm.identity and all(secret not in (r.error or "") + r.text for r in out)
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".sqlite" for p in written) and any(p.name == "lora_names.json" for p in written)
    for path in written:
        assert secret.encode() not in path.read_bytes(), path
    for rec in caplog.records:
        assert secret not in rec.getMessage()


def test_missing_key_sends_placeholder_and_says_so(tmp_path, monkeypatch, caplog):
    monkeypatch.delenv(KEY_ENV, raising=False)
    caplog.set_level(logging.INFO, logger="factory.llm.openai_backend")
    with MockOpenAIServer() as server:
        llm = _llm(server, tmp_path)
        assert llm.generate(_requests(1))[0].ok
        llm.close()
        assert server.chat_records()[0]["headers"]["authorization"] == "Bearer EMPTY"
    assert any(KEY_ENV in rec.getMessage() and "not set" in rec.getMessage() for rec in caplog.records)


@pytest.mark.parametrize(
    ("field", "version", "expect"),
    [
        ("response_format", "knowtrace-json-v1", "json_schema"),
        ("response_format_json_object", "knowtrace-json-v1", "json_object"),
        ("structured_outputs", "knowtrace-json-v1", "json"),
        ("structured_outputs", "knowtrace-v1", "regex"),
        ("grammar", "knowtrace-v1", "gbnf"),
        ("grammar", "knowtrace-json-v1", "gbnf"),
    ],
)
def test_a_constraint_travels_in_the_field_the_server_understands(tmp_path, field, version, expect):
    from factory.agent.loop import step_constraints

    constraint = step_constraints(version, 2)["explore"]
    request = ChatRequest.of([{"role": "user", "content": "q"}], Sampling(), 0, constraint)
    with MockOpenAIServer() as server:
        llm = _llm(server, tmp_path, constraint_field=field)
        (resp,) = llm.generate([request, ChatRequest(request.messages, request.sampling)])[:1]
        llm.close()
        records = server.chat_records()  # in arrival order: the two were sent concurrently
    constrained = next(r for r in records if r["constraint"])
    plain = next(r for r in records if not r["constraint"])
    sent_in = "response_format" if field.startswith("response_format") else field
    assert resp.ok and constrained["constraint"] == sent_in and plain["constraint"] is None
    sent = constrained["body"][sent_in]
    if expect == "json_object":  # llama-cpp-python's form
        assert sent == {"type": "json_object", "schema": json.loads(constraint.json_schema)}
    elif expect == "json_schema":
        assert sent["type"] == "json_schema" and sent["json_schema"]["schema"] == json.loads(
            constraint.json_schema
        )
    elif expect == "json":
        assert sent == {"json": json.loads(constraint.json_schema)}
    elif expect == "regex":
        assert sent == {"regex": constraint.regex}
    else:
        assert sent == constraint.gbnf and sent.startswith("root ::= ")


def test_a_text_syntax_cannot_travel_as_a_json_schema(tmp_path):
    from factory.agent.loop import step_constraints

    constraint = step_constraints("knowtrace-v1", 2)["final"]
    with MockOpenAIServer() as server:
        llm = _llm(server, tmp_path, constraint_field="response_format")
        with pytest.raises(FactoryError, match="knowtrace-json-v1"):
            llm.generate([ChatRequest.of([{"role": "user", "content": "q"}], Sampling(), 0, constraint)])
        llm.close()
        assert server.chat_records() == []
