"""A mock OpenAI-compatible server (FastAPI + uvicorn) with scripted replies and fault injection.

Endpoints: ``POST /v1/chat/completions``, ``GET /v1/models`` (with vLLM's ``root`` and
``max_model_len`` when given), ``POST /v1/load_lora_adapter`` (as vLLM with ``--enable-lora``; or
404 as a server without run-time adapters, ``lora_endpoint=False``), ``GET /stats`` (calls and the
latencies drawn, for the benchmark's ideal rate). Replies come from ``script(messages, model) -> text``.

Latency: ``latency_s`` per call, or with ``latency_sigma`` > 0 a lognormal draw with median
``latency_s`` (sigma 1: p99 about ten times the median), deterministic per request key. With
``capacity`` C, at most C calls sleep their latency at once and the others queue (a server of C
slots: C / latency calls/s at most).

Structured outputs: a request may carry vLLM/OpenAI ``response_format`` (json_schema),
``structured_outputs`` (json | regex | grammar | choice) or llama.cpp ``grammar``; a malformed one is
refused with 400 as a real server would, and each chat record notes which one came (``constraint``).

Faults are deterministic: a request is identified by a hash of its body (so every retry of the
same request has the same key) and the attempt number for that key; ``FaultPlan.fault_for(key,
attempt)`` picks the fault from a hash of both. ``permanent`` keys fail on every attempt.

In tests::

    with MockOpenAIServer(script=..., faults=FaultPlan(rate=0.3)) as server:
        llm = openai_llm([server.base_url], tmp_path, max_retries=2)  # OpenAILLM(LLMParams(...), ...)

``python -m tests.mock_openai_server --port 8123 --latency 0.1`` runs it as its own process (the
benchmark does this so that the server's CPU time is not counted as the client's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Self

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

FAULT_KINDS = ("latency", "429", "500", "hang", "malformed", "no_choices", "truncated", "empty")
# Faults after which a retrying client should still get a successful reply.
TRANSIENT = ("latency", "429", "500", "hang", "malformed", "no_choices", "empty")


def echo_script(messages: list[dict], model: str) -> str:
    """Default reply: echoes the last user message (so a test can check request/response pairing)."""
    last = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
    return f"echo[{model}]: {last}"


def _unit(*parts: object) -> float:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def lognormal_latency(median_s: float, sigma: float, *key: object) -> float:
    """A lognormal draw (median ``median_s``) that is a pure function of ``key``."""
    u = min(max(_unit("latency", *key), 1e-12), 1 - 1e-12)
    return median_s * math.exp(sigma * NormalDist().inv_cdf(u))


@dataclass
class FaultPlan:
    """Which request attempts fail, and how. Deterministic in (seed, request key, attempt)."""

    rate: float = 0.0  # probability that one attempt gets a fault
    kinds: tuple[str, ...] = FAULT_KINDS
    seed: int = 0
    permanent_rate: float = 0.0  # share of request keys that get a 500 on every attempt
    extra_latency_s: float = 0.3  # for "latency"
    hang_s: float = 5.0  # for "hang": longer than the client's timeout

    def permanent(self, key: str) -> bool:
        return self.permanent_rate > 0 and _unit(self.seed, "permanent", key) < self.permanent_rate

    def fault_for(self, key: str, attempt: int) -> str | None:
        if self.permanent(key):
            return "500"
        if self.rate <= 0 or _unit(self.seed, key, attempt) >= self.rate:
            return None
        return self.kinds[int(_unit(self.seed, "kind", key, attempt) * len(self.kinds))]


@dataclass
class MockState:
    script: Callable[[list[dict], str], str] = echo_script
    faults: FaultPlan = field(default_factory=FaultPlan)
    latency_s: float = 0.0
    latency_sigma: float = 0.0  # > 0: lognormal latency with median latency_s
    capacity: int | None = None  # calls served at once (the others queue); None: no bound
    base_model: str = "mock-model"
    model_root: str | None = None  # what /v1/models reports as the weights (vLLM's 'root')
    max_model_len: int | None = None
    lora_endpoint: bool = True  # False: /v1/load_lora_adapter answers 404 (llama.cpp's server)
    lora_enabled: bool = True  # False: 400 "LoRA is not enabled" (vLLM without --enable-lora)
    # a folder: lora_path is resolved against it (the server's own working directory) and a path with no
    # adapter_config.json there is answered as vLLM does (404 "No adapter found for <path>"); None: any
    # path is accepted
    lora_cwd: Path | None = None
    record: bool = True
    records: list[dict] = field(default_factory=list)  # every request: path, headers, body, attempt, fault
    attempts: Counter = field(default_factory=Counter)
    adapters: dict[str, str] = field(default_factory=dict)  # lora_name -> lora_path
    in_flight: int = 0
    max_in_flight: int = 0
    completions: int = 0  # chat requests received (all attempts)
    latency_total_s: float = 0.0  # latency drawn over all chat requests
    lock: threading.Lock = field(default_factory=threading.Lock)
    _slots: asyncio.Semaphore | None = field(default=None, repr=False)

    def slots(self) -> asyncio.Semaphore | contextlib.nullcontext:
        """What a call holds while it is served: one of ``capacity`` slots, or nothing."""
        if self.capacity is None:
            return contextlib.nullcontext()
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.capacity)
        return self._slots


def request_key(body: dict) -> str:
    """Identity of a request across retries: a hash of its (canonical) JSON body."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def make_app(state: MockState) -> FastAPI:
    """The FastAPI app serving ``state``."""
    app = FastAPI()

    def remember(request: Request, body: dict, **extra) -> None:
        if state.record:
            with state.lock:
                state.records.append(
                    {"path": request.url.path, "headers": dict(request.headers), "body": body, **extra}
                )

    @app.get("/v1/models")
    async def models() -> dict:
        base = {"id": state.base_model, "object": "model", "owned_by": "mock"}
        if state.model_root is not None:
            base["root"] = state.model_root
        if state.max_model_len is not None:
            base["max_model_len"] = state.max_model_len
        adapters = [
            {
                "id": n,
                "object": "model",
                "owned_by": "mock",
                "root": state.adapters[n],
                "parent": state.base_model,
            }
            for n in sorted(state.adapters)
        ]
        return {"object": "list", "data": [base, *adapters]}

    @app.get("/stats")
    async def stats() -> dict:
        return {"completions": state.completions, "latency_total_s": state.latency_total_s}

    @app.post("/v1/load_lora_adapter")
    async def load_lora_adapter(request: Request) -> Response:
        body = await request.json()
        remember(request, body)
        if not state.lora_endpoint:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        name, path = body.get("lora_name"), body.get("lora_path")
        if not name or not path:
            return JSONResponse(
                {"error": {"message": "lora_name and lora_path are required"}}, status_code=400
            )
        if name in state.adapters:  # vLLM's answer for a name it already holds
            return JSONResponse(
                {
                    "error": {
                        "message": f"The lora adapter '{name}' has already been loaded.",
                        "type": "InvalidUserInput",
                    }
                },
                status_code=400,
            )
        refused = _vllm_refusal(state, name, path)
        if refused is not None:
            return refused
        state.adapters[name] = path
        return Response(f"Success: LoRA adapter '{name}' added successfully.", media_type="text/plain")

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        key = request_key(body)
        with state.lock:
            attempt = state.attempts[key]
            state.attempts[key] += 1
            state.completions += 1
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        fault = state.faults.fault_for(key, attempt)
        constraint, problem = structured_output(body)
        remember(
            request, body, key=key, attempt=attempt, fault=fault, t=time.monotonic(), constraint=constraint
        )
        latency = state.latency_s
        if state.latency_sigma > 0:
            latency = lognormal_latency(state.latency_s, state.latency_sigma, key)  # the same on every run
        with state.lock:
            state.latency_total_s += latency
        try:
            if latency:
                async with state.slots():
                    await asyncio.sleep(latency)
            if problem is not None:
                return JSONResponse(
                    {"error": {"message": problem, "type": "BadRequestError"}}, status_code=400
                )
            return await _reply(state, body, fault, request)
        finally:
            with state.lock:
                state.in_flight -= 1

    return app


def _vllm_refusal(state: MockState, name: str, path: str) -> Response | None:
    """vLLM's answers (vllm/entrypoints/openai/serving_models.py) for LoRA off and for a path with no
    adapter as the server resolves it."""
    if not state.lora_enabled:
        message, kind, code = "LoRA is not enabled. Use --enable-lora to enable LoRA.", "BadRequestError", 400
    elif state.lora_cwd is not None and not (state.lora_cwd / path / "adapter_config.json").is_file():
        message, kind, code = f"Loading lora {name} failed: No adapter found for {path}", "NotFoundError", 404
    else:
        return None
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": code}}, status_code=code
    )


def structured_output(body: dict) -> tuple[str | None, str | None]:
    """(which constraint field the request carries, or None; what is malformed about it, or None)."""
    present = [k for k in ("response_format", "structured_outputs", "grammar") if body.get(k) is not None]
    if not present:
        return None, None
    if len(present) > 1:
        return "+".join(present), f"more than one constraint field: {present}"
    name, value = present[0], body[present[0]]
    if name == "response_format":
        ok = (
            isinstance(value, dict)
            and value.get("type") == "json_schema"
            and isinstance(value.get("json_schema"), dict)
            and isinstance(value["json_schema"].get("schema"), dict)
            and isinstance(value["json_schema"].get("name"), str)
        ) or (isinstance(value, dict) and value.get("type") in ("text", "json_object"))
        return (
            name,
            None if ok else "response_format: expected {type: json_schema, json_schema: {name, schema}}",
        )
    if name == "structured_outputs":
        keys = set(value) & {"json", "regex", "grammar", "choice"} if isinstance(value, dict) else set()
        return name, None if len(
            keys
        ) == 1 else "structured_outputs: expected one of json, regex, grammar, choice"
    ok = isinstance(value, str) and "root ::=" in value
    return name, None if ok else "grammar: expected a GBNF grammar with a root rule"


async def _reply(state: MockState, body: dict, fault: str | None, request: Request) -> Response:
    model = body.get("model", "")
    if model != state.base_model and model not in state.adapters:
        return JSONResponse({"error": {"message": f"The model `{model}` does not exist."}}, status_code=404)
    if fault == "latency":
        await asyncio.sleep(state.faults.extra_latency_s)
    elif fault == "429":
        return JSONResponse({"error": {"message": "rate limited", "type": "rate_limit"}}, status_code=429)
    elif fault == "500":
        return JSONResponse({"error": {"message": "internal error", "type": "server_error"}}, status_code=500)
    elif fault == "hang":  # until hang_s passes or the client gives up (timeout) and disconnects
        deadline = time.monotonic() + state.faults.hang_s
        while time.monotonic() < deadline:
            if await request.is_disconnected():
                return Response(status_code=499)
            await asyncio.sleep(0.05)
    elif fault == "malformed":
        return Response('{"id": "cmpl-x", "choices": [{"message": ', media_type="application/json")
    elif fault == "no_choices":
        return JSONResponse({"id": "cmpl-x", "object": "chat.completion", "created": 0, "model": model})
    text = state.script(body.get("messages", []), model)
    finish = "stop"
    if fault == "truncated":
        text, finish = text[: max(1, len(text) // 2)], "length"
    elif fault == "empty":
        text = ""
    prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
    return JSONResponse(
        {
            "id": "cmpl-mock",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": len(text.split()),
                "total_tokens": prompt_tokens + len(text.split()),
            },
        }
    )


class MockOpenAIServer:
    """Runs the mock app with uvicorn on 127.0.0.1 (a free port) in a background thread."""

    def __init__(
        self,
        script: Callable[[list[dict], str], str] = echo_script,
        faults: FaultPlan | None = None,
        latency_s: float = 0.0,
        base_model: str = "mock-model",
        record: bool = True,
        port: int = 0,
        **state: object,
    ):
        self.state = MockState(
            script=script,
            faults=faults or FaultPlan(),
            latency_s=latency_s,
            base_model=base_model,
            record=record,
            **state,
        )
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))  # 0: a free port
        self.port = self._sock.getsockname()[1]
        config = uvicorn.Config(
            make_app(self.state),
            log_level="warning",
            timeout_graceful_shutdown=1,
            backlog=2048,
            access_log=False,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def records(self) -> list[dict]:
        return self.state.records

    def chat_records(self) -> list[dict]:
        return [r for r in self.state.records if r["path"].endswith("/chat/completions")]

    def start(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("mock OpenAI server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def openai_llm(urls: list[str], tmp_path: Path, **llm: object):
    """The openai backend on ``urls`` (mock servers) serving 'mock-model': ``llm`` sets other fields of
    ``LLMParams`` (e.g. ``max_retries=1``); adapter names are remembered in ``tmp_path/lora_names.json``."""
    from factory.llm.openai_backend import OpenAILLM
    from factory.params.agent_sections import LLMParams

    cfg = LLMParams(**{"base_urls": urls, "model": "mock-model", **llm})
    return OpenAILLM(cfg, registry_path=tmp_path / "lora_names.json")


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the mock OpenAI-compatible server in the foreground.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every chat completion")
    parser.add_argument(
        "--latency-sigma", type=float, default=0.0, help="> 0: lognormal latency, median --latency"
    )
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--model", default="mock-model")
    args = parser.parse_args()
    state = MockState(
        faults=FaultPlan(rate=args.fault_rate),
        latency_s=args.latency,
        latency_sigma=args.latency_sigma,
        base_model=args.model,
        record=False,
    )
    uvicorn.run(
        make_app(state), host="127.0.0.1", port=args.port, log_level="warning", backlog=2048, access_log=False
    )


if __name__ == "__main__":
    main()
