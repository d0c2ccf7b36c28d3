"""A content-addressed response cache: its keys, and the LLM wrapper that uses it (the SQLite store
is ``factory.llm.responses.ResponseCache``).

The key is the sha256 of canonical JSON of (backend, identity, messages, sampling, sample index,
and for a constrained request its grammar and the field it travels in);
``identity`` carries a hash of the model and adapter weights, so a different adapter never hits
another adapter's entries. Only successful responses are stored: a failed call is retried on the
next run, and so is one whose reply the caller marked unusable (``mark_unusable``: a parse error, an
empty reply). Every response carries its key (``ChatResponse.cache_key``) for that. The database uses
WAL so several processes (e.g. parallel DVC stages) can share it; where two of them ask the same call
at once, both go on with the reply stored first (a replay of either gives its own output again).
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
        self.unusable = 0  # replies marked unusable by the caller
        self._in_flight: dict[str, asyncio.Future] = {}  # touched on inner's loop only
        if hasattr(inner, "acomplete"):  # only a streaming inner backend makes this one streaming
            self.acomplete, self.run = self._acomplete, inner.run

    def _key(self, request: ChatRequest) -> str:
        return cache_key(
            self.inner.backend, self.inner.identity, request, getattr(self.inner, "constraint_via", "")
        )

    @property
    def replays_unusable(self) -> bool:
        """The local backend's replies are fixed by its identity (the weights, adapter and dtype): asked
        again, its unusable replies could only change with the batch they fall in (bf16 is not
        batch-invariant), so they are replayed like the others and a re-run writes the same bytes. A
        served model's are asked again: the server may have been fixed under the same name."""
        return self.inner.backend == "local"

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
        found = self.cache.get_many(keys, self.replays_unusable)
        todo: dict[str, ChatRequest] = {}
        for key, request in zip(keys, requests):
            if key not in found and key not in todo:
                todo[key] = request
        fresh: dict[str, ChatResponse] = {}
        if todo:
            answers = self.inner.generate(list(todo.values()))
            fresh = dict(zip(todo, answers))
            items = [(k, backend, identity, r) for k, r in fresh.items() if r.ok]
            store = getattr(self.cache, "store", None)
            if store is not None:  # the replies another process stored first replace ours
                fresh.update(store(items))
            else:
                self.cache.put_many(items)
        out = []
        for key in keys:
            if key in found:
                self.hits += 1
                meter.add(calls=1)
                out.append(dataclasses.replace(found[key], cache_key=key))
            else:
                self.misses += 1
                out.append(dataclasses.replace(fresh[key], cache_key=key))
        return out

    def mark_unusable(self, keys: list[str], reason: str) -> None:
        """The replies of ``keys`` could not be used (``reason``, e.g. ``parse_error``): a later run
        asks those calls again (``ResponseCache.mark_unusable``)."""
        mark = getattr(self.cache, "mark_unusable", None)
        if mark is not None and keys:
            mark(list(keys), reason)
            self.unusable += len(keys)

    async def _acomplete(self, request: ChatRequest) -> ChatResponse:
        """The response: from the cache, from the same request in flight, or from ``inner`` (a copy
        each: every caller owns its response object)."""
        key = self._key(request)
        shared = self._in_flight.get(key)  # first: until stored, the reply that stays is not known
        if shared is not None:
            self.misses += 1
            return dataclasses.replace(await asyncio.shield(shared))
        found = self.cache.get(key, self.replays_unusable)
        if found is not None:
            self.hits += 1
            meter.add(calls=1)
            found.cache_key = key
            return found
        self.misses += 1
        # the others asking the same meanwhile wait for this one's reply (no Task of its own: cheaper)
        self._in_flight[key] = shared = asyncio.get_running_loop().create_future()
        try:
            response = await self.inner.acomplete(request)
            response.cache_key = key
            if response.ok:  # stored the moment it arrives
                response = await self._stored(key, response)
        except BaseException:
            shared.cancel()
            raise
        finally:
            del self._in_flight[key]
        shared.set_result(response)
        return response

    async def _stored(self, key: str, response: ChatResponse) -> ChatResponse:
        """``response`` once committed, or the reply another process stored first for ``key`` (the
        wait is one commit window, ~20 ms, among calls of a second or so)."""
        item = [(key, self.inner.backend, self.inner.identity, response)]
        if not getattr(self.cache, "reports_winners", False):
            self.cache.put_many(item)
            return response
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self.cache.put_many(item, on_stored=functools.partial(_wake, loop, done))
        winner = (await done).get(key)
        return response if winner is None else dataclasses.replace(winner, cache_key=key)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def load_adapter(self, *args, **kwargs) -> None:
        """Pass-through for backends that serve adapters by name (openai)."""
        self.inner.load_adapter(*args, **kwargs)

    def close(self) -> None:
        self.inner.close()
        self.cache.close()


def _wake(loop: asyncio.AbstractEventLoop, done: asyncio.Future, lost: dict) -> None:
    """On the cache's writer thread: hand the outcome of a store to the waiting coroutine."""

    def settle() -> None:
        if not done.done():
            done.set_result(lost)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed: nobody waits any more
        pass
