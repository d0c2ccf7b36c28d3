"""OpenAI-compatible endpoints (vLLM, OpenAI, llama.cpp server, Ollama) as a batch backend.

A batch is sent concurrently (at most ``llm.concurrency`` requests in flight) from a private event
loop running in its own thread, so ``generate()`` is a plain synchronous call that also works
inside a notebook's running loop. Requests go out through one aiohttp session (keep-alive
connections): measured against the mock server, the openai SDK's client cost 1.4 ms of CPU per
call and aiohttp 0.27 ms, and at a few hundred calls a second that CPU is the driver's limit. The
body is the Chat Completions API's, so any OpenAI-compatible server reads it. This module retries
with exponential backoff and full jitter on 429, 408, 5xx, timeouts, connection errors and
malformed replies (invalid JSON, no choices) and empty completions (a server that returns no text
had a transient fault: the same request is sent again, never a repair prompt), going round-robin
over ``llm.base_urls`` so a retry can land on another server. Other 4xx are final. A request that
still has no reply becomes an error response saying why ("HTTP 500 after 5 retries: ...").

Besides the batch ``generate``, ``await acomplete(request)`` answers one request inside a coroutine
that ``run(coroutine)`` runs on the backend's loop: the agent's continuous scheduler runs there,
so its work and the HTTP share one thread (handing every reply across threads cost more CPU than
the reply itself). Both share one bound on requests in flight.

Constrained decoding: a request's ``Constraint`` travels in the field ``llm.constraint_field`` names:
``response_format`` (``{type: json_schema, json_schema: {name, schema}}``: vLLM, SGLang, llama.cpp's
llama-server, OpenAI), ``response_format_json_object`` (``{type: json_object, schema}``: what
llama-cpp-python's server reads), ``structured_outputs`` (vLLM >= 0.10.2: ``json`` for a JSON syntax,
``regex`` for a text one) or ``grammar`` (llama.cpp's GBNF, both servers).

Identity: the model's name, what the servers' ``/models`` say about it (vLLM: ``root``, the
weights' path or hub id, and ``max_model_len``) and ``llm.model_revision`` when given, so that a server
that swaps weights under the same name does not serve stale cache hits.

The API key is read from the environment variable ``llm.api_key_env`` names at every ``generate()``
call and kept only in memory; it is never part of ``identity``, cache keys, logs, errors or files.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import msgspec

from factory.llm.base import ChatRequest, ChatResponse
from factory.llm.fleet import PROBE_EVERY_S, Fleet
from factory.llm.served import ServedModels
from factory.params.agent_sections import LLMParams
from factory.utils import paths
from factory.utils.errors import FactoryError
from factory.utils.progress import meter

log = logging.getLogger(__name__)

NO_KEY = "EMPTY"  # what vLLM accepts when it runs without --api-key
# The longest wait between two retries (not a user param): with many llm.max_retries the doubling of
# llm.backoff_s would otherwise leave a request idle for minutes after its server is back.
MAX_BACKOFF_S = 30.0


class _Malformed(Exception):
    """A 2xx reply that is not a usable chat completion."""


def request_seed(seed: int, sample: int) -> int:
    """The per-request seed sent to the server: distinct per (seed, sample index), within int31."""
    return (seed * 1_000_003 + sample) % (2**31 - 1)


class OpenAILLM(ServedModels):
    """Chat completions from one or more OpenAI-compatible servers, optionally on a LoRA adapter."""

    backend = "openai"

    def __init__(
        self,
        cfg: LLMParams,
        *,
        registry_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        probe_every_s: float = PROBE_EVERY_S,
    ):
        """The servers and settings of ``cfg`` (``params.llm``, validated when it was made). Adapter
        names are remembered in ``registry_path`` (None: the project's cache folder); a model folder at
        ``tokenizer_path`` makes ``count_tokens`` exact."""
        if not cfg.base_urls:
            raise FactoryError(
                "llm.base_urls is empty: the openai backend needs at least one endpoint, e.g. "
                "--set llm.base_urls=[http://host:8000/v1]"
            )
        self.base_urls = [u.rstrip("/") for u in cfg.base_urls]
        self.model = cfg.model
        self.api_key_env = cfg.api_key_env
        self.concurrency, self.concurrency_per_url = cfg.concurrency, cfg.concurrency_per_url
        self.routing, self.probe_every_s = cfg.routing, probe_every_s
        self.timeout_s, self.max_retries, self.backoff_s = cfg.timeout_s, cfg.max_retries, cfg.backoff_s
        self.constraint_field = cfg.constraint_field
        self.constraint_via = f"openai:{cfg.constraint_field}"  # part of a constrained request's cache key
        self.model_revision = cfg.model_revision
        self._described: str | None = None  # what the servers say about the model (see identity)
        self.registry_path = (
            Path(registry_path) if registry_path is not None else paths.CACHE_DIR / "lora_names.json"
        )
        self.served_model = cfg.model  # the adapter name after load_adapter
        self.adapter_digest: str | None = None
        self.adapters: dict[str, str] = {}  # name -> adapter sha256 registered by this instance
        self.attempts = 0  # HTTP chat requests sent (retries included)
        self.retries = 0
        self._rng = random.Random()  # jitter only; never affects outputs
        self._fleet: Any = None  # made on the event loop (factory.llm.fleet)
        self._session = None  # aiohttp.ClientSession, created on the loop
        self._chat_urls: dict[str, Any] = {}  # endpoint -> its parsed chat completions URL
        self._warned_no_key = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._slots: asyncio.Semaphore | None = None  # requests in flight, for generate and acomplete alike
        self._tokenizer = None
        if tokenizer_path is not None and Path(tokenizer_path).is_dir():
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)

    # ------------------------------------------------------------------ public API
    def generate(self, requests: list[ChatRequest]) -> list[ChatResponse]:
        """One response per request, in order; failures become responses with ``error`` set."""
        if not requests:
            return []
        key = self._api_key()
        return self.run(self._generate(requests, key))

    async def acomplete(self, request: ChatRequest) -> ChatResponse:
        """The response to one request (within the bound on requests in flight); only inside ``run``."""
        return await self._one(request, self._slots, self._api_key())

    def run(self, coroutine: Coroutine) -> Any:
        """Run ``coroutine`` on the backend's event loop and return its result (or raise its error).
        Interrupted (Ctrl-C), it cancels the coroutine and waits until it has stopped, so nothing of
        it runs on after the caller's clean-up."""
        self._ensure_loop()
        stopped = threading.Event()

        async def guarded():
            try:
                return await coroutine
            finally:
                stopped.set()

        future = asyncio.run_coroutine_threadsafe(guarded(), self._loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            stopped.wait(timeout=60)
            raise

    def count_tokens(self, text: str) -> int:
        """Tokens under ``tokenizer_path`` when given; else an approximation (words + punctuation)."""
        if self._tokenizer is not None:
            return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])
        return len(re.findall(r"\w+|[^\w\s]", text))

    def close(self) -> None:
        """Close the HTTP clients and stop the private event loop."""
        if self._loop is None:
            return
        self.run(self._close_clients())
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop.close()
        self._loop = self._thread = self._slots = None

    # ------------------------------------------------------------------ internals
    def _api_key(self) -> str:
        key = os.environ.get(self.api_key_env)
        if not key:
            if not self._warned_no_key:
                log.info(
                    "environment variable %s is not set: sending requests without an API key",
                    self.api_key_env,
                )
                self._warned_no_key = True
            return NO_KEY
        return key

    def _redact(self, text: str) -> str:
        key = os.environ.get(self.api_key_env)
        return text.replace(key, "***") if key else text

    def _backoff(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(cap, backoff * 2**attempt)]."""
        return self._rng.uniform(0, min(MAX_BACKOFF_S, self.backoff_s * 2**attempt))

    def _ensure_loop(self) -> None:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._slots = asyncio.Semaphore(self.concurrency)
            self._fleet = Fleet(
                self.base_urls,
                per_url=self.concurrency_per_url,
                routing=self.routing,
                probe_every_s=self.probe_every_s,
                probe=self._answers_models,
            )
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="openai-llm-loop", daemon=True
            )
            self._thread.start()

    async def _answers_models(self, url: str) -> bool:
        """Whether an endpoint out of rotation answers ``GET /models`` again (the fleet's probe)."""
        import aiohttp

        headers = {"Authorization": f"Bearer {self._api_key()}"}
        timeout = aiohttp.ClientTimeout(total=min(self.timeout_s, 5.0))
        async with self._ensure_session().get(f"{url}/models", headers=headers, timeout=timeout) as resp:
            return resp.status == 200

    async def _close_clients(self) -> None:
        if self._fleet is not None:
            self._fleet.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _ensure_session(self):
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30),  # the slots bound it
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                raise_for_status=False,
            )
        return self._session

    async def _generate(self, requests: list[ChatRequest], key: str) -> list[ChatResponse]:
        return list(await asyncio.gather(*(self._one(r, self._slots, key) for r in requests)))

    async def _post(self, url: str, body: bytes, key: str) -> tuple[int, bytes]:
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        target = self._chat_urls.get(url)
        if target is None:  # parsed once per endpoint, not on every request
            import yarl

            target = self._chat_urls[url] = yarl.URL(f"{url}/chat/completions")
        async with self._ensure_session().post(target, data=body, headers=headers) as resp:
            return resp.status, await resp.read()

    def constraint_fields(self, request: ChatRequest) -> dict[str, Any]:
        """The request body fields that carry ``request.constraint`` to the server ({} without one)."""
        c = request.constraint
        if c is None:
            return {}
        if self.constraint_field.startswith("response_format"):
            if c.json_schema is None:
                raise FactoryError(
                    f"constraint {c.name!r} has no JSON schema (a text syntax), so it cannot travel in "
                    "response_format: use a JSON prompt version (agent.prompt_version: knowtrace-json-v1) "
                    "or llm.constraint_field: grammar (llama.cpp) / structured_outputs (vLLM)"
                )
            name = re.sub(r"[^A-Za-z0-9_-]", "_", c.name)[:64]
            schema = json.loads(c.json_schema)
            if self.constraint_field == "response_format_json_object":
                return {"response_format": {"type": "json_object", "schema": schema}}
            return {
                "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
            }
        if self.constraint_field == "structured_outputs":
            form = {"json": json.loads(c.json_schema)} if c.json_schema is not None else {"regex": c.regex}
            return {"structured_outputs": form}
        return {"grammar": c.gbnf}

    async def _one(self, request: ChatRequest, slots: asyncio.Semaphore, key: str) -> ChatResponse:
        import aiohttp

        s = request.sampling
        body: dict[str, Any] = {
            "model": self.served_model,
            "messages": request.message_dicts(),
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_new_tokens,
            "seed": request_seed(s.seed, request.sample),
        }
        if s.stop:
            body["stop"] = list(s.stop)
        body.update(self.constraint_fields(request))
        payload = msgspec.json.encode(body)
        t0 = time.perf_counter()
        reason = last_detail = ""
        for attempt in range(self.max_retries + 1):
            async with slots:  # the bound covers requests in flight, not backoff sleeps
                endpoint = await self._fleet.acquire(request.affinity)
                self.attempts += 1
                failed = True  # the endpoint did not serve the attempt (its health counts it)
                try:
                    status, raw = await self._post(endpoint.url, payload, key)
                    failed = status >= 500
                    if status >= 300:
                        detail = self._redact(_error_detail(raw))[:200]
                        if status < 500 and status not in (408, 429):
                            return _failed(f"HTTP {status}, not retried ({detail})", t0)
                        reason, last_detail = f"HTTP {status}", detail
                    else:
                        response = _response(msgspec.json.decode(raw), time.perf_counter() - t0)
                        if response.text.strip() or response.finish_reason == "length":
                            return response
                        reason, last_detail = "empty completion", "the server returned no text"
                except TimeoutError:
                    reason, last_detail = "timeout", f"no reply within {self.timeout_s:g} s"
                except aiohttp.ClientError as exc:  # refused, reset, dropped mid-body
                    reason, last_detail = "connection error", type(exc).__name__
                except (
                    _Malformed,
                    ValueError,
                    TypeError,
                    KeyError,
                    AttributeError,
                ) as exc:  # DecodeError too
                    reason, last_detail = (
                        "malformed response",
                        f"{type(exc).__name__}: {self._redact(str(exc))[:120]}",
                    )
                except Exception as exc:  # noqa: BLE001 — anything else is final for this request, never for the batch
                    failed = False
                    return _failed(f"{type(exc).__name__}: {self._redact(str(exc))[:200]}", t0)
                finally:
                    await self._fleet.release(endpoint, failed)
            if attempt < self.max_retries:
                self.retries += 1
                await asyncio.sleep(self._backoff(attempt))
        return _failed(f"{reason} after {self.max_retries} retries ({last_detail})", t0)


def _error_detail(raw: bytes) -> str:
    """The server's error message ({"error": {"message": ...}} or {"detail": ...}), else the body."""
    text = raw.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if data.get("detail"):
            return str(data["detail"])
    return text


def _response(data: Any, latency_s: float) -> ChatResponse:
    """A ChatResponse from a chat.completion JSON object; _Malformed when it is not one."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _Malformed("reply has no choices")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise _Malformed("choice has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise _Malformed("message content is not text")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    meter.add(calls=1, tokens=int(usage.get("completion_tokens") or 0))
    return ChatResponse(
        text=content or "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        latency_s=latency_s,
        finish_reason=choices[0].get("finish_reason") or "stop",
    )


def _failed(reason: str, t0: float) -> ChatResponse:
    return ChatResponse(text="", latency_s=time.perf_counter() - t0, finish_reason="error", error=reason)
