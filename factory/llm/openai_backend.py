"""OpenAI-compatible endpoints (vLLM, OpenAI, llama.cpp server, Ollama) as a batch backend.

A batch is sent concurrently (at most ``concurrency`` requests in flight) from a private event
loop running in its own thread, so ``generate()`` is a plain synchronous call that also works
inside a notebook's running loop. The openai client's own retries are off; this module retries
with exponential backoff and full jitter on 429, 408, 5xx, timeouts, connection errors and
malformed replies (invalid JSON, no choices), going round-robin over ``base_urls`` so a retry
can land on another server. Other 4xx are final. A request that still has no reply becomes an
error response saying why ("HTTP 500 after 5 retries: ...").

The API key is read from ``os.environ[api_key_env]`` at every ``generate()`` call and kept only
in memory; it is never part of ``identity``, cache keys, logs, errors or files.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import random
import re
import threading
import time
from collections.abc import Coroutine
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from factory import paths
from factory.errors import FactoryError
from factory.llm.base import ChatRequest, ChatResponse
from factory.llm.identity import SHORT, adapter_hash

log = logging.getLogger(__name__)

NO_KEY = "EMPTY"  # what vLLM accepts when it runs without --api-key


class _Malformed(Exception):
    """A 2xx reply that is not a usable chat completion."""


def request_seed(seed: int, sample: int) -> int:
    """The per-request seed sent to the server: distinct per (seed, sample index), within int31."""
    return (seed * 1_000_003 + sample) % (2**31 - 1)


class OpenAILLM:
    """Chat completions from one or more OpenAI-compatible servers, optionally on a LoRA adapter."""

    backend = "openai"

    def __init__(
        self,
        base_urls: list[str],
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 32,
        timeout_s: float = 60.0,
        max_retries: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        registry_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
    ):
        if not base_urls:
            raise FactoryError("llm.base_urls is empty: the openai backend needs at least one endpoint, e.g. http://host:8000/v1")
        if concurrency < 1:
            raise FactoryError(f"llm.concurrency must be >= 1 (got {concurrency})")
        self.base_urls = [u.rstrip("/") for u in base_urls]
        self.model = model
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.registry_path = (
            Path(registry_path) if registry_path is not None else paths.CACHE_DIR / "lora_names.json"
        )
        self.served_model = model  # the adapter name after load_adapter
        self.adapter_digest: str | None = None
        self.adapters: dict[str, str] = {}  # name -> adapter sha256 registered by this instance
        self.attempts = 0  # HTTP chat requests sent (retries included)
        self.retries = 0
        self._rng = random.Random()  # jitter only; never affects outputs
        self._next_url = 0
        self._clients: dict[str, Any] = {}
        self._client_key: str | None = None
        self._warned_no_key = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tokenizer = None
        if tokenizer_path is not None and Path(tokenizer_path).is_dir():
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)

    # ------------------------------------------------------------------ identity and adapters
    @property
    def identity(self) -> str:
        suffix = f"+{self.adapter_digest[:SHORT]}" if self.adapter_digest else ""
        return f"openai:{self.served_model}{suffix}"

    def use_model(self, name: str, adapter_digest: str | None = None) -> None:
        """Send requests to ``name`` (an adapter already served under that name, with its weights hash)."""
        self.served_model, self.adapter_digest = name, adapter_digest

    def load_adapter(self, name: str, local_path: str | Path, server_path: str | None = None) -> None:
        """Register a LoRA adapter on every server (vLLM ``/load_lora_adapter``) and use it.

        ``local_path`` is hashed; ``server_path`` is the path as the servers see it (default: the
        same). A name is never re-used for other weights (vLLM caches adapters by name): a known
        name with a different hash is refused, the same name and hash again is a no-op.
        """
        digest = adapter_hash(local_path)
        known = self.adapters.get(name)
        if known == digest:
            self.use_model(name, digest)
            return
        if known is not None:
            raise _reused(name, known, digest)
        with self._registry() as registry:
            previous = registry.get(name)
            if previous is not None and previous != digest:
                raise _reused(name, previous, digest)
            registry[name] = digest
        body = {"lora_name": name, "lora_path": str(server_path if server_path is not None else local_path)}
        for url in self.base_urls:
            self._post_adapter(url, body)
        self.adapters[name] = digest
        self.use_model(name, digest)
        log.info(
            "LoRA adapter %s (sha256 %s) loaded on %d server(s)", name, digest[:SHORT], len(self.base_urls)
        )

    @contextmanager
    def _registry(self):
        """The name -> adapter hash registry file, locked for a read-modify-write."""
        self.registry_path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.registry_path.with_name(self.registry_path.name + ".lock")
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                registry = json.loads(self.registry_path.read_text()) if self.registry_path.exists() else {}
            except ValueError as exc:
                raise FactoryError(
                    f"{self.registry_path}: not valid JSON ({exc}); fix or delete it"
                ) from None
            before = dict(registry)
            yield registry
            if registry != before:
                tmp = self.registry_path.with_name(f".{self.registry_path.name}.tmp-{os.getpid()}")
                tmp.write_text(json.dumps(registry, indent=2, sort_keys=True) + "\n")
                os.replace(tmp, self.registry_path)

    def _post_adapter(self, base_url: str, body: dict) -> None:
        import httpx

        url = f"{base_url}/load_lora_adapter"
        headers = {"Authorization": f"Bearer {self._api_key()}"}
        reason = ""
        for attempt in range(self.max_retries + 1):
            try:
                resp = httpx.post(url, json=body, headers=headers, timeout=self.timeout_s)
            except httpx.HTTPError as exc:
                reason = f"connection error ({type(exc).__name__})"
            else:
                text = self._redact(resp.text)
                if resp.status_code < 300:
                    return
                if resp.status_code == 400 and re.search(r"already\s+(been\s+)?loaded", text, re.IGNORECASE):
                    return  # the server holds this name already; our registry vouches for the hash
                if resp.status_code < 500 and resp.status_code not in (408, 429):
                    raise FactoryError(
                        f"{url}: could not load LoRA adapter {body['lora_name']!r}: HTTP "
                        f"{resp.status_code}: {text[:300]}"
                    )
                reason = f"HTTP {resp.status_code}: {text[:200]}"
            if attempt < self.max_retries:
                time.sleep(self._backoff(attempt))
        raise FactoryError(
            f"{url}: could not load LoRA adapter {body['lora_name']!r}: {reason} after "
            f"{self.max_retries} retries"
        )

    # ------------------------------------------------------------------ public API
    def generate(self, requests: list[ChatRequest]) -> list[ChatResponse]:
        """One response per request, in order; failures become responses with ``error`` set."""
        if not requests:
            return []
        key = self._api_key()
        return self._run(self._generate(requests, key))

    def count_tokens(self, text: str) -> int:
        """Tokens under ``tokenizer_path`` when given; else an approximation (words + punctuation)."""
        if self._tokenizer is not None:
            return len(self._tokenizer(text, add_special_tokens=False)["input_ids"])
        return len(re.findall(r"\w+|[^\w\s]", text))

    def close(self) -> None:
        """Close the HTTP clients and stop the private event loop."""
        if self._loop is None:
            return
        self._run(self._close_clients())
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop.close()
        self._loop = self._thread = None

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
        return self._rng.uniform(0, min(self.max_backoff_s, self.backoff_s * 2**attempt))

    def _run(self, coro: Coroutine) -> Any:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(
                target=self._loop.run_forever, name="openai-llm-loop", daemon=True
            )
            self._thread.start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _close_clients(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients = {}

    async def _generate(self, requests: list[ChatRequest], key: str) -> list[ChatResponse]:
        from openai import AsyncOpenAI

        if key != self._client_key:  # the key changed (or first call): new clients
            await self._close_clients()
            self._clients = {
                url: AsyncOpenAI(base_url=url, api_key=key, max_retries=0, timeout=self.timeout_s)
                for url in self.base_urls
            }
            self._client_key = key
        slots = asyncio.Semaphore(self.concurrency)
        return list(await asyncio.gather(*(self._one(r, slots) for r in requests)))

    async def _one(self, request: ChatRequest, slots: asyncio.Semaphore) -> ChatResponse:
        import openai

        s = request.sampling
        kwargs: dict[str, Any] = {
            "model": self.served_model,
            "messages": request.message_dicts(),
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_tokens": s.max_new_tokens,
            "seed": request_seed(s.seed, request.sample),
        }
        if s.stop:
            kwargs["stop"] = list(s.stop)
        t0 = time.perf_counter()
        reason = last_detail = ""
        for attempt in range(self.max_retries + 1):
            url = self.base_urls[self._next_url % len(self.base_urls)]
            self._next_url += 1
            async with slots:  # the bound covers requests in flight, not backoff sleeps
                self.attempts += 1
                try:
                    # The client's generic POST (auth, timeout, HTTP error mapping) with the body as
                    # bytes: the typed create() costs ~1 ms of CPU per call in request transforms and
                    # response models, which caps the calls/s one process can drive.
                    raw = await self._clients[url].post("/chat/completions", cast_to=bytes, body=kwargs)
                    return _response(json.loads(raw), time.perf_counter() - t0)
                except openai.APITimeoutError:
                    reason, last_detail = "timeout", f"no reply within {self.timeout_s:g} s"
                except openai.APIConnectionError as exc:
                    reason, last_detail = "connection error", type(exc.__cause__ or exc).__name__
                except openai.APIStatusError as exc:
                    detail = self._redact(re.sub(r"^Error code: \d+ - ", "", str(exc.message)))[:200]
                    if exc.status_code < 500 and exc.status_code not in (408, 429):
                        return _failed(f"HTTP {exc.status_code}, not retried ({detail})", t0)
                    reason, last_detail = f"HTTP {exc.status_code}", detail
                except (
                    _Malformed,
                    openai.APIResponseValidationError,
                    ValueError,
                    TypeError,
                    KeyError,
                    AttributeError,
                ) as exc:
                    reason, last_detail = (
                        "malformed response",
                        f"{type(exc).__name__}: {self._redact(str(exc))[:120]}",
                    )
                except Exception as exc:  # noqa: BLE001 — anything else is final for this request, never for the batch
                    return _failed(f"{type(exc).__name__}: {self._redact(str(exc))[:200]}", t0)
            if attempt < self.max_retries:
                self.retries += 1
                await asyncio.sleep(self._backoff(attempt))
        return _failed(f"{reason} after {self.max_retries} retries ({last_detail})", t0)


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
    return ChatResponse(
        text=content or "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        latency_s=latency_s,
        finish_reason=choices[0].get("finish_reason") or "stop",
    )


def _failed(reason: str, t0: float) -> ChatResponse:
    return ChatResponse(text="", latency_s=time.perf_counter() - t0, finish_reason="error", error=reason)


def _reused(name: str, old: str, new: str) -> FactoryError:
    return FactoryError(
        f"LoRA adapter name {name!r} is already registered for other weights (sha256 {old[:SHORT]}..., now "
        f"{new[:SHORT]}...); vLLM caches adapters by name, so a name is never re-used — choose a new name"
    )
