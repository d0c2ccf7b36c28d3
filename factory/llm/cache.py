"""A content-addressed response cache: its keys, and the LLM wrapper that uses it (the SQLite store
is ``factory.llm.responses.ResponseCache``).

The key is the sha256 of canonical JSON of (backend, identity, messages, sampling, sample index,
and for a constrained request its grammar and the field it travels in);
``identity`` carries a hash of the model and adapter weights, so a different adapter never hits
another adapter's entries. Only successful responses are stored: a failed call is retried on the
next run. The database uses WAL so several processes (e.g. parallel DVC stages) can share it.
It lives under ``data/cache/`` and is not a DVC output; ``bench/cache.py`` measures it at the size
of the full protocol (5.4M entries).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import json

import msgspec

from factory.llm.base import LLM, ChatRequest, ChatResponse
from factory.llm.responses import ResponseCache
from factory.utils.progress import meter


def cache_key(backend: str, identity: str, request: ChatRequest, constraint_via: str = "") -> str:
    """sha256 of the canonical JSON of everything that determines a response.

    ``constraint_via``: how the backend applies a constraint (e.g. the server field), since the
    same grammar sent as a JSON schema or as GBNF may decode differently. Unconstrained requests
    keep the keys they always had. The canonical JSON is ``json.dumps(payload, sort_keys=True,
    ensure_ascii=False, separators=(",", ":"))``; msgspec writes the same bytes several times
    faster (strings, ints and plain floats alike), so it writes them unless a sampling float would
    be in exponent notation, which the two spell differently."""
    s = request.sampling
    payload: dict = {
        "backend": backend,
        "identity": identity,
        "messages": request.messages,
        "sampling": {
            "temperature": s.temperature,
            "top_p": s.top_p,
            "max_new_tokens": s.max_new_tokens,
            "seed": s.seed,
            "stop": s.stop,
        },
        "sample": request.sample,
    }
    if request.constraint is not None:
        payload["constraint"] = _constraint_key(request.constraint, constraint_via)
    if any(isinstance(v, float) and "e" in repr(v) for v in payload["sampling"].values()):
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    else:
        blob = _CANONICAL.encode(payload)
    return hashlib.sha256(blob).hexdigest()


_CANONICAL = msgspec.json.Encoder(order="sorted")


@functools.lru_cache(maxsize=256)
def _constraint_key(c, via: str) -> dict:
    """A constraint's part of the key: its name, a digest of its forms, how it travels (the grammars
    are large and the same for every call of a step kind: digested once)."""
    forms = json.dumps([c.regex, c.gbnf, c.json_schema], ensure_ascii=False)
    return {"name": c.name, "sha256": hashlib.sha256(forms.encode("utf-8")).hexdigest(), "via": via}


class CachedLLM:
    """An LLM that answers from the cache and sends only the misses to ``inner`` (in one batch).

    With an inner backend that answers single requests on its loop (``acomplete``/``run``), so does
    this wrapper: a hit is answered at once, a miss is asked of ``inner`` and stored as soon as it
    succeeds (so a killed run loses no paid-for reply but those of the cache's last commit window),
    and a request already in flight is not sent twice.
    """

    def __init__(self, inner: LLM, cache: ResponseCache):
        self.inner = inner
        self.cache = cache
        self.hits = 0
        self.misses = 0
        self._in_flight: dict[str, asyncio.Future] = {}  # touched on inner's loop only
        if hasattr(inner, "acomplete"):  # only a streaming inner backend makes this one streaming
            self.acomplete, self.run = self._acomplete, inner.run

    def _key(self, request: ChatRequest) -> str:
        return cache_key(
            self.inner.backend, self.inner.identity, request, getattr(self.inner, "constraint_via", "")
        )

    @property
    def identity(self) -> str:  # read through: an adapter loaded later changes it
        return self.inner.identity

    @property
    def backend(self) -> str:
        return self.inner.backend

    def generate(self, requests: list[ChatRequest]) -> list[ChatResponse]:
        """Cached responses for hits; one ``inner.generate`` call for the distinct misses."""
        backend, identity = self.inner.backend, self.inner.identity
        keys = [self._key(r) for r in requests]
        found = self.cache.get_many(keys)
        todo: dict[str, ChatRequest] = {}
        for key, request in zip(keys, requests):
            if key not in found and key not in todo:
                todo[key] = request
        fresh: dict[str, ChatResponse] = {}
        if todo:
            answers = self.inner.generate(list(todo.values()))
            fresh = dict(zip(todo, answers))
            self.cache.put_many([(k, backend, identity, r) for k, r in fresh.items() if r.ok])
        out = []
        for key in keys:
            if key in found:
                self.hits += 1
                meter.add(calls=1)
                out.append(dataclasses.replace(found[key]))
            else:
                self.misses += 1
                out.append(dataclasses.replace(fresh[key]))
        return out

    async def _acomplete(self, request: ChatRequest) -> ChatResponse:
        """The response: from the cache, from the same request in flight, or from ``inner`` (a copy
        each: every caller owns its response object)."""
        key = self._key(request)
        found = self.cache.get(key)
        if found is not None:
            self.hits += 1
            meter.add(calls=1)
            return found
        self.misses += 1
        shared = self._in_flight.get(key)
        if shared is not None:
            return dataclasses.replace(await asyncio.shield(shared))
        # the others asking the same meanwhile wait for this one's reply (no Task of its own: cheaper)
        self._in_flight[key] = shared = asyncio.get_running_loop().create_future()
        backend, identity = self.inner.backend, self.inner.identity
        try:
            response = await self.inner.acomplete(request)
        except BaseException:
            shared.cancel()
            raise
        finally:
            del self._in_flight[key]
        shared.set_result(response)
        if response.ok:  # stored the moment it arrives
            self.cache.put_many([(key, backend, identity, response)])
        return response

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def load_adapter(self, *args, **kwargs) -> None:
        """Pass-through for backends that serve adapters by name (openai)."""
        self.inner.load_adapter(*args, **kwargs)

    def close(self) -> None:
        self.inner.close()
        self.cache.close()
