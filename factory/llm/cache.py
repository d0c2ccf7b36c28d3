"""A content-addressed response cache in SQLite, and the LLM wrapper that uses it.

The key is the sha256 of canonical JSON of (backend, identity, messages, sampling, sample index);
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
from pathlib import Path

from factory import paths
from factory.llm.base import LLM, ChatRequest, ChatResponse

DEFAULT_PATH = paths.CACHE_DIR / "responses.sqlite"
_CHUNK = 500  # SQLite host-parameter budget per query


def cache_key(backend: str, identity: str, request: ChatRequest) -> str:
    """sha256 of the canonical JSON of everything that determines a response."""
    payload = {
        "backend": backend,
        "identity": identity,
        "messages": [list(m) for m in request.messages],
        "sampling": {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(request.sampling).items()
        },
        "sample": request.sample,
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
    """An LLM that answers from the cache and sends only the misses to ``inner`` (in one batch)."""

    def __init__(self, inner: LLM, cache: ResponseCache):
        self.inner = inner
        self.cache = cache
        self.hits = 0
        self.misses = 0

    @property
    def identity(self) -> str:  # read through: an adapter loaded later changes it
        return self.inner.identity

    @property
    def backend(self) -> str:
        return self.inner.backend

    def generate(self, requests: list[ChatRequest]) -> list[ChatResponse]:
        """Cached responses for hits; one ``inner.generate`` call for the distinct misses."""
        backend, identity = self.inner.backend, self.inner.identity
        keys = [cache_key(backend, identity, r) for r in requests]
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

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def load_adapter(self, *args, **kwargs) -> None:
        """Pass-through for backends that serve adapters by name (openai)."""
        self.inner.load_adapter(*args, **kwargs)

    def close(self) -> None:
        self.inner.close()
        self.cache.close()
