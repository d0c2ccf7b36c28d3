"""A content-addressed response cache in SQLite, and the LLM wrapper that uses it.

The key is the sha256 of canonical JSON of (backend, identity, messages, sampling, sample index,
and for a constrained request its grammar and the field it travels in);
``identity`` carries a hash of the model and adapter weights, so a different adapter never hits
another adapter's entries. Only successful responses are stored: a failed call is retried on the
next run. The database uses WAL so several processes (e.g. parallel DVC stages) can share it.
It lives under ``data/cache/`` and is not a DVC output; ``bench/cache.py`` measures it at the size
of the full protocol (5.4M entries).
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import hashlib
import json
import logging
import os
import queue
import sqlite3
import threading
import time
import weakref
from concurrent.futures import Future
from pathlib import Path

import msgspec

from factory import paths
from factory.llm.base import LLM, ChatRequest, ChatResponse

log = logging.getLogger(__name__)
DEFAULT_PATH = paths.CACHE_DIR / "responses.sqlite"
_CHUNK = 500  # SQLite host-parameter budget per query


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


class ResponseCache:
    """Successful responses by cache key, in one SQLite file (WAL; safe across processes).

    A lookup is one indexed read (a B-tree of 32-byte keys: its depth grows with the log of the
    entries, 3 to 4 pages at millions); an insert is queued and committed by a writer thread in
    group commits (every reply queued while the last commit ran goes in the next), so the caller
    never waits for the disk. A reply is on disk within a commit of arriving; ``flush`` and
    ``close`` wait for the queue. Replies queued but not committed are answered from memory.

    A damaged file (a crash on a full disk, a truncated copy) is set aside as
    ``<name>.corrupt-<UTC time>`` with a warning naming it, and the run goes on with a fresh cache:
    the cache is not a DVC output, only a saving.
    """

    def __init__(self, path: str | Path = DEFAULT_PATH):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()  # the connections, and a recovery
        self._pending: dict[bytes, tuple[str, str, str]] = {}  # key -> (backend, identity, record)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._done = threading.Condition()
        self._queued = self._committed = 0
        self._identities: dict[tuple[str, str], int] = {}
        self._open()
        self._writer = threading.Thread(target=self._write_loop, name="response-cache-writer", daemon=True)
        self._writer.start()
        # a process that ends without close() still commits what it queued
        atexit.register(_close_at_exit, weakref.ref(self))

    # ------------------------------------------------------------------ connections
    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def _open(self) -> None:
        for attempt in (0, 1):
            try:
                self._read = self._connect()
                self._write = self._connect()
                self._write.execute(
                    "CREATE TABLE IF NOT EXISTS identities (id INTEGER PRIMARY KEY, backend TEXT NOT NULL, "
                    "identity TEXT NOT NULL, UNIQUE (backend, identity))"
                )
                self._write.execute(
                    "CREATE TABLE IF NOT EXISTS entries (key BLOB NOT NULL UNIQUE, "
                    "identity INTEGER NOT NULL, response TEXT NOT NULL, created REAL NOT NULL)"
                )
                self._migrate()
                self._read.execute("SELECT 1 FROM entries LIMIT 1").fetchall()
                return
            except sqlite3.DatabaseError as exc:
                if attempt:
                    raise
                self._set_aside(exc)

    def _migrate(self) -> None:
        """Entries of the first layout (table ``responses``, hex text keys) move to ``entries``."""
        if not self._write.execute("SELECT 1 FROM sqlite_master WHERE name = 'responses'").fetchall():
            return
        rows = self._write.execute(
            "SELECT key, backend, identity, response, created FROM responses"
        ).fetchall()
        self._write.execute("BEGIN IMMEDIATE")
        try:
            self._insert([(bytes.fromhex(k), b, i, r, c) for k, b, i, r, c in rows])
            self._write.execute("DROP TABLE responses")
            self._write.execute("COMMIT")
        except BaseException:
            self._write.execute("ROLLBACK")
            raise
        log.info("%s: moved %d cached responses to the current layout", self.path, len(rows))

    def _set_aside(self, exc: BaseException) -> None:
        """Move a damaged database (and its WAL) out of the way; the next open starts a fresh one."""
        for db in (getattr(self, "_read", None), getattr(self, "_write", None)):
            if db is not None:
                try:
                    db.close()
                except sqlite3.Error:
                    pass
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            source = Path(f"{self.path}{suffix}")
            if source.exists():
                os.replace(source, Path(f"{aside}{suffix}"))
        self._identities = {}
        log.warning(
            "response cache %s is damaged (%s): set aside as %s; going on with a fresh cache (its "
            "replies are asked again)",
            self.path,
            exc,
            aside,
        )

    def _recover(self, exc: BaseException) -> None:
        with self._lock:
            self._set_aside(exc)
            self._open()

    # ------------------------------------------------------------------ reads
    def get_many(self, keys: list[str]) -> dict[str, ChatResponse]:
        """The cached responses among ``keys`` (marked cached=True), by key."""
        found: dict[str, ChatResponse] = {}
        unique = sorted(set(keys))
        rows: list[tuple[bytes, str]] = []
        with self._lock:
            blobs = [bytes.fromhex(k) for k in unique]
            missing = []
            for blob in blobs:
                pending = self._pending.get(blob)
                if pending is not None:
                    rows.append((blob, pending[2]))
                else:
                    missing.append(blob)
            try:
                for start in range(0, len(missing), _CHUNK):
                    chunk = missing[start : start + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    rows += self._read.execute(
                        f"SELECT key, response FROM entries WHERE key IN ({marks})", chunk
                    ).fetchall()
            except sqlite3.DatabaseError as exc:
                self._recover(exc)
        for blob, record in rows:
            found[bytes(blob).hex()] = ChatResponse(**json.loads(record), cached=True)
        return found

    def get(self, key: str) -> ChatResponse | None:
        return self.get_many([key]).get(key)

    # ------------------------------------------------------------------ writes
    def put_many(self, items: list[tuple[str, str, str, ChatResponse]]) -> None:
        """Queue (key, backend, identity, response) rows for the writer; the first recorded response of
        a key wins."""
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
                (
                    bytes.fromhex(key),
                    backend,
                    identity,
                    json.dumps(record, sort_keys=True, ensure_ascii=False),
                )
            )
        if not rows:
            return
        with self._lock:
            for blob, backend, identity, record in rows:
                self._pending.setdefault(blob, (backend, identity, record))
        with self._done:
            self._queued += 1
        self._queue.put(rows)

    def _write_loop(self) -> None:
        while True:
            batches = [self._queue.get()]
            while True:  # everything queued meanwhile goes into the same commit
                try:
                    batches.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(b is None for b in batches)
            rows = [(blob, b, i, r, time.time()) for batch in batches if batch for blob, b, i, r in batch]
            if rows:
                self._commit(rows)
            with self._done:
                self._committed += sum(1 for b in batches if b is not None)
                self._done.notify_all()
            if stop:
                return

    def _commit(self, rows: list[tuple]) -> None:
        with self._lock:
            try:
                self._write.execute("BEGIN IMMEDIATE")
                try:
                    self._insert(rows)
                    self._write.execute("COMMIT")
                except BaseException:
                    self._write.execute("ROLLBACK")
                    raise
            except sqlite3.DatabaseError as exc:
                self._recover(exc)
                return self._commit(rows)
            finally:
                for blob, *_ in rows:
                    self._pending.pop(blob, None)

    def _insert(self, rows: list[tuple]) -> None:
        """(key, backend, identity, record, created) rows into ``entries`` (inside a transaction)."""
        values = []
        for blob, backend, identity, record, created in rows:
            ident = self._identities.get((backend, identity))
            if ident is None:
                self._write.execute(
                    "INSERT OR IGNORE INTO identities (backend, identity) VALUES (?, ?)", (backend, identity)
                )
                ident = self._write.execute(
                    "SELECT id FROM identities WHERE backend = ? AND identity = ?", (backend, identity)
                ).fetchone()[0]
                self._identities[(backend, identity)] = ident
            values.append((blob, ident, record, created))
        self._write.executemany("INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?)", values)

    def flush(self) -> None:
        """Wait until every queued response is committed."""
        with self._done:
            target = self._queued
            self._done.wait_for(lambda: self._committed >= target)

    def __len__(self) -> int:
        self.flush()
        with self._lock:
            return self._read.execute("SELECT COUNT(*) FROM entries").fetchone()[0]

    def close(self) -> None:
        if self._writer.is_alive():
            self._queue.put(None)
            self._writer.join()
        with self._lock:
            self._read.close()
            self._write.close()


def _close_at_exit(ref: weakref.ref) -> None:
    cache = ref()
    if cache is not None and cache._writer.is_alive():
        cache.close()


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
        found = self.cache.get(key)
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
