"""What an OpenAI-compatible server serves: the model's identity, and LoRA adapters registered by name.

``ServedModels`` is the part of ``factory.llm.openai_backend.OpenAILLM`` that talks to a server's
``/models`` and ``/load_lora_adapter`` rather than its chat endpoint. It uses the backend's
``base_urls``, ``model``, ``model_revision``, ``timeout_s``, ``max_retries``, ``registry_path`` and
its ``_api_key``/``_redact``/``_backoff`` helpers.

Identity: the cache key of a served base model must change when the server's weights do, so it
holds what ``GET /models`` reports for the model (vLLM: ``root``, the weights' path or hub id, and
``max_model_len``) and ``llm.model_revision`` when set. Every server of ``base_urls`` must report
the same. Adapters: served as ``<variant>-r<round>-<weights hash>``, a name never re-used for
other weights (vLLM caches adapters by name); registered at run time (``llm.load_lora``) or by the
operator at server start (``--lora-modules name=path``), and checked against ``/models`` then.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path

from factory.llm.identity import SHORT, adapter_hash
from factory.utils.errors import FactoryError

log = logging.getLogger(__name__)


class ServedModels:
    @property
    def identity(self) -> str:
        """``openai:<model>[@<root>][:ctx<max_model_len>][#<model_revision>][/<adapter>+<sha256>]``."""
        if self._described is None:
            self._described = self._describe_model()
        out = f"openai:{self.model}{self._described}"
        if self.model_revision:
            out += f"#{self.model_revision}"
        if self.served_model != self.model:
            out += f"/{self.served_model}"
        if self.adapter_digest:
            out += f"+{self.adapter_digest[:SHORT]}"
        return out

    def served_models(self, url: str) -> dict[str, dict] | None:
        """id -> entry of ``GET <url>/models``; None when the server has no such endpoint."""
        import httpx

        headers = {"Authorization": f"Bearer {self._api_key()}"}
        reason = ""
        for attempt in range(self.max_retries + 1):
            try:
                resp = httpx.get(f"{url}/models", headers=headers, timeout=self.timeout_s)
            except httpx.HTTPError as exc:
                reason = f"connection error ({type(exc).__name__})"
            else:
                if resp.status_code in (404, 405, 501):
                    return None
                if resp.status_code < 300:
                    try:
                        data = resp.json().get("data") or []
                        return {str(m["id"]): m for m in data if isinstance(m, dict) and "id" in m}
                    except (ValueError, AttributeError, KeyError):
                        return None
                reason = f"HTTP {resp.status_code}: {self._redact(resp.text)[:200]}"
                if resp.status_code < 500 and resp.status_code not in (408, 429):
                    break
            if attempt < self.max_retries:
                time.sleep(self._backoff(attempt))
        raise FactoryError(
            f"{url}/models: cannot read the served models ({reason}); the factory asks the servers which "
            "weights they serve under llm.model before it sends (or replays from the cache) any request"
        )

    def _describe_model(self) -> str:
        """The identity suffix from what every server reports about ``model`` (the same on all)."""
        seen: dict[str, str] = {}
        for url in self.base_urls:
            models = self.served_models(url)
            if models is None:  # no /models (some proxies): the name (and llm.model_revision) only
                log.info("%s/models is not available: the model identity is its name only", url)
                seen[url] = ""
                continue
            entry = models.get(self.model)
            if entry is None:
                listed = ", ".join(sorted(models)[:10]) or "nothing"
                raise FactoryError(
                    f"{url} does not serve a model named {self.model!r} (its /models lists: {listed}); "
                    "set llm.model to the name the server was started with"
                )
            suffix = ""
            if entry.get("root") and entry.get("root") != self.model:
                suffix += f"@{entry['root']}"
            if entry.get("max_model_len"):
                suffix += f":ctx{int(entry['max_model_len'])}"
            seen[url] = suffix
        if len(set(seen.values())) > 1:
            found = "; ".join(f"{u}: {v or '(nothing reported)'}" for u, v in seen.items())
            raise FactoryError(
                f"the servers in llm.base_urls report different weights for {self.model!r} ({found}); "
                "one cache identity needs the same model behind every URL"
            )
        return next(iter(seen.values()), "")

    def use_model(self, name: str, adapter_digest: str | None = None, server_path: str | None = None) -> None:
        """Send requests to ``name``: an adapter the operator registered at server start (with its weights
        hash). Every server must list it; ``server_path`` goes into the error that says how to
        register it."""
        for url in self.base_urls:
            models = self.served_models(url)
            if models is not None and name not in models:
                raise FactoryError(
                    f"{url} does not serve the adapter {name!r} (llm.load_lora is false, so the factory "
                    "does not register it): start the server with --lora-modules "
                    f"{name}={server_path or '<path>'}, "
                    "or set llm.load_lora: true on a vLLM started with --enable-lora and "
                    "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
                )
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
            self.served_model, self.adapter_digest = name, digest
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
        self.served_model, self.adapter_digest = name, digest
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
                refused = adapter_refusal(url, body, resp.status_code, text)
                if refused is not None:
                    raise refused
                reason = f"HTTP {resp.status_code}: {text[:200]}"
            if attempt < self.max_retries:
                time.sleep(self._backoff(attempt))
        raise FactoryError(
            f"{url}: could not load LoRA adapter {body['lora_name']!r}: {reason} after "
            f"{self.max_retries} retries"
        )


# What vLLM answers on /v1/load_lora_adapter (vllm/entrypoints/openai/serving_models.py, vllm/exceptions.py):
# - the route exists only with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True: without it FastAPI answers 404
#   {"detail": "Not Found"} (a server that is not vLLM: 404, 405 or 501 likewise);
# - with the route but without --enable-lora the engine raises "LoRA is not enabled. Use --enable-lora to
#   enable LoRA.", answered as 400 BadRequestError;
# - no adapter at the path as the server resolves it (a relative one against the server's own working
#   directory): 404 NotFoundError "Loading lora <name> failed: No adapter found for <path>" (older
#   releases: 400 "Loading lora <path> failed"). Both bodies name the path sent.
_LORA_OFF = re.compile(r"LoRA is not enabled|runtime LoRA updating is disabled", re.IGNORECASE)
_NO_ADAPTER = re.compile(r"No adapter found", re.IGNORECASE)


def adapter_refusal(url: str, body: dict, status: int, text: str) -> FactoryError | None:
    """The error for a ``/load_lora_adapter`` answer that a retry cannot change, saying which failure it
    is: run-time loading off, or no adapter at the path as the server sees it. None for 408, 429, 5xx."""
    name, path = body["lora_name"], body["lora_path"]
    head = f"{url}: could not load LoRA adapter {name!r}: HTTP {status}"
    if _LORA_OFF.search(text) or (status in (404, 405, 501) and not _names_path(text, path)):
        what = (
            "vLLM says LoRA is not enabled (started without --enable-lora)"
            if _LORA_OFF.search(text)
            else "it has no such endpoint (vLLM started without VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, or "
            "a server that cannot load adapters, such as llama.cpp's)"
        )
        return FactoryError(
            f"{head} ({text[:200]}). This server cannot load adapters at run time: {what}. Either start "
            "vLLM with --enable-lora and the environment variable VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, "
            "or set llm.load_lora: false and register the adapter when the server starts: "
            f"--lora-modules {name}={path} (the factory prints each round's adapter name and path before "
            "it uses them)"
        )
    if status in (400, 404) and _names_path(text, path):
        relative = (
            ""
            if path.startswith("/")
            else " It is a relative path: the server resolves it against its own working directory."
        )
        return FactoryError(
            f"{head}: the server found no adapter at the path it was sent, {path!r} (its answer: "
            f"{text[:300]}).{relative} The server reads lora_path on its own filesystem, so the adapter "
            "folder must be there at that path: a server on another machine sees this project's models/ "
            "folder where a shared filesystem is mounted on it. Set llm.lora_path_prefix to that folder "
            "as the server sees it (docs/full-scale.md, 'Adapters on a shared filesystem')."
        )
    if status < 500 and status not in (408, 429):
        return FactoryError(f"{head}: {text[:300]}")
    return None


def _names_path(text: str, path: str) -> bool:
    """Whether a server's answer is about the adapter path (vLLM's 'No adapter found for <path>')."""
    return bool(_NO_ADAPTER.search(text)) or path in text


def _reused(name: str, old: str, new: str) -> FactoryError:
    return FactoryError(
        f"LoRA adapter name {name!r} is already registered for other weights (sha256 {old[:SHORT]}..., now "
        f"{new[:SHORT]}...); vLLM caches adapters by name, so a name is never re-used — choose a new name"
    )
