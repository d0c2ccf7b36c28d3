"""A content-addressed response cache in SQLite, and the LLM wrapper that uses it.

The key is the sha256 of canonical JSON of (backend, identity, messages, sampling, sample index,
and for a constrained request its grammar and the field it travels in);
``identity`` carries a hash of the model and adapter weights, so a different adapter never hits
another adapter's entries. Only successful responses are stored: a failed call is retried on the
next run. The database uses WAL so several processes (e.g. parallel DVC stages) can share it.
It lives under ``data/cache/`` and is not a DVC output.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import threading
import time
from concurrent.futures import Future
from pathlib import Path

from factory import paths
from factory.llm.base import LLM, ChatRequest, ChatResponse

DEFAULT_PATH = paths.CACHE_DIR / "responses.sqlite"
_CHUNK = 500  # SQLite host-parameter budget per query


def cache_key(backend: str, identity: str, request: ChatRequest, constraint_via: str = "") -> str:
    """sha256 of the canonical JSON of everything that determines a response.

    ``constraint_via``: how the backend applies a constraint (e.g. the server field), since the
    same grammar sent as a JSON schema or as GBNF may decode differently. Unconstrained requests
    keep the keys they always had."""
    payload: dict = {
        "backend": backend,
        "identity": identity,
        "messages": [list(m) for m in request.messages],
        "sampling": {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(request.sampling).items()
        },
        "sample": request.sample,
    }
    c = request.constraint
    if c is not None:
        forms = json.dumps([c.regex, c.gbnf, c.json_schema], ensure_ascii=False)
        payload["constraint"] = {
            "name": c.name,
            "sha256": hashlib.sha256(forms.encode("utf-8")).hexdigest(),
            "via": constraint_via,
        }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Successful responses by cache key, in one SQLite file (WAL; safe across processes)."""

    def __init__(self, path: str | Path = DEFAULT_PATH):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, backend TEXT NOT NULL, "
            "identity TEXT NOT NULL, response TEXT NOT NULL, created REAL NOT NULL)"
        )

    def get_many(self, keys: list[str]) -> dict[str, ChatResponse]:
        """The cached responses among ``keys`` (marked cached=True), by key."""
        found: dict[str, ChatResponse] = {}
        unique = sorted(set(keys))
        with self._lock:
            for start in range(0, len(unique), _CHUNK):
                chunk = unique[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                for key, blob in self._db.execute(
                    f"SELECT key, response FROM responses WHERE key IN ({marks})", chunk
                ):
                    found[key] = ChatResponse(**json.loads(blob), cached=True)
        return found

    def put_many(self, items: list[tuple[str, str, str, ChatResponse]]) -> None:
        """Store (key, backend, identity, response) rows; the first recorded response of a key wins."""
        rows = []
        for key, backend, identity, resp in items:
            record = {
                "text": resp.text,
                "prompt_tokens": resp.prompt_tokens,
                "completion_tokens": resp.completion_tokens,
                "latency_s": resp.latency_s,
                "finish_reason": resp.finish_reason,
            }
            rows.append(
                (key, backend, identity, json.dumps(record, sort_keys=True, ensure_ascii=False), time.time())
            )
        if not rows:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?, ?)", rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CachedLLM:
    """An LLM that answers from the cache and sends only the misses to ``inner`` (in one batch).

    With an inner backend that can ``submit`` single requests, so can this wrapper: a hit is a
    finished future, a miss goes to ``inner.submit`` and is stored as soon as it succeeds (so a
    killed run loses no paid-for reply), and a request already in flight is not sent twice.
    """

    def __init__(self, inner: LLM, cache: ResponseCache):
        self.inner = inner
        self.cache = cache
        self.hits = 0
        self.misses = 0
        self._in_flight: dict[str, Future] = {}
        self._lock = threading.Lock()
        if hasattr(inner, "submit"):
            self.submit = self._submit  # only a streaming inner backend makes this one streaming

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
                out.append(dataclasses.replace(found[key]))
            else:
                self.misses += 1
                out.append(dataclasses.replace(fresh[key]))
        return out

    def _submit(self, request: ChatRequest) -> Future:
        """A future of the response: from the cache, from the same request in flight, or from ``inner``."""
        key = self._key(request)
        found = self.cache.get_many([key]).get(key)
        if found is not None:
            self.hits += 1
            done: Future = Future()
            done.set_result(found)
            return done
        self.misses += 1
        with self._lock:
            shared = self._in_flight.get(key)
            if shared is not None:
                return _copy_of(shared)
            backend, identity = self.inner.backend, self.inner.identity
            inner = self.inner.submit(request)
            self._in_flight[key] = inner

        def store(f: Future) -> None:
            with self._lock:
                self._in_flight.pop(key, None)
            if not f.cancelled() and f.exception() is None and f.result().ok:
                self.cache.put_many([(key, backend, identity, f.result())])

        inner.add_done_callback(store)
        return _copy_of(inner)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def load_adapter(self, *args, **kwargs) -> None:
        """Pass-through for backends that serve adapters by name (openai)."""
        self.inner.load_adapter(*args, **kwargs)

    def close(self) -> None:
        self.inner.close()
        self.cache.close()


def _copy_of(source: Future) -> Future:
    """A future resolved with a copy of ``source``'s response (each caller owns its response object)."""
    out: Future = Future()

    def relay(f: Future) -> None:
        if f.exception() is not None:
            out.set_exception(f.exception())
        else:
            out.set_result(dataclasses.replace(f.result()))

    source.add_done_callback(relay)
    return out
