"""The response cache's store: successful responses by key in one SQLite file, safe across processes.

Each entry records the stage that stored it (``FACTORY_STAGE``, set by the CLI) and its outcome: ok, or
``unusable:<reason>`` once the caller could not use the reply (``mark_unusable``); an unusable entry is
a miss to lookups and is replaced by the next reply stored for its key. When two processes store the
same key, the first commit wins and the other is told which reply the cache holds (``on_stored``,
``store``), so every caller goes on with the one reply a replay would give.

A lookup is one indexed read (a B-tree of 32-byte keys: its depth grows with the log of the
entries, 3 to 4 pages at millions); an insert is queued and committed by a writer thread, one
commit per window of ``commit_window_s`` (20 ms) for everything queued in it. Entries of the first
layout (hex keys in table ``responses``) are moved over on open. A damaged file is set aside and
replaced by a fresh one. ``bench/cache.py`` measures it at the size
of the full protocol (5.4M entries).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

import msgspec

from factory.llm import cache_sql as sql
from factory.llm.base import ChatResponse
from factory.llm.cache_sql import CHUNK, Mark, Rows
from factory.utils import paths

log = logging.getLogger(__name__)
DEFAULT_PATH = paths.CACHE_DIR / "responses.sqlite"
_RECORD = msgspec.json.Encoder(order="sorted").encode  # a response as stored (read back with json)
STAGE_ENV = "FACTORY_STAGE"  # the stage storing entries (the CLI sets it; recorded per entry)


class ResponseCache:
    """Successful responses by cache key, in one SQLite file (WAL; safe across processes).

    A lookup is one indexed read (a B-tree of 32-byte keys: its depth grows with the log of the
    entries, 3 to 4 pages at millions); an insert is queued and committed by a writer thread, so
    the caller never waits for the disk. The writer commits once per ``commit_window_s`` whatever
    was queued in it: replies come one at a time, and a commit per reply (with the writer's wake-up
    and GIL hand-off) cost more CPU than the rest of a call. A reply is on disk within a window of
    arriving, so a killed run loses at most its last window's replies; what must not be on disk
    ahead of them waits with ``then``. ``flush`` and ``close`` wait for the queue. Replies queued but
    not committed are answered from memory.

    A damaged file (a crash on a full disk, a truncated copy) is set aside as
    ``<name>.corrupt-<UTC time>`` with a warning naming it, and the run goes on with a fresh cache:
    the cache is not a DVC output, only a saving.
    """

    reports_winners = True  # put_many(..., on_stored=) says which reply the cache holds

    def __init__(
        self, path: str | Path = DEFAULT_PATH, commit_window_s: float = 0.02, stage: str | None = None
    ):
        self.path = Path(path)
        self.stage = stage if stage is not None else os.environ.get(STAGE_ENV) or None
        self.commit_window_s = commit_window_s  # a reply is committed at most this long after it came
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # one lock per connection, and one for the replies in the writer's queue: a lookup never waits
        # for a commit (WAL lets the two connections work at once); a recovery takes both (write first)
        self._write_lock, self._read_lock, self._pending_lock = (
            threading.Lock(),
            threading.Lock(),
            threading.Lock(),
        )
        self._pending: dict[bytes, tuple[str, str, str]] = {}  # key -> (backend, identity, record)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._done = threading.Condition()
        self._queued = self._committed = 0
        self._action_error: BaseException | None = None  # the first failed ``then`` action
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
                sql.create(self._write)
                moved = sql.migrate_first_layout(self._write, self._identities)
                if moved is not None:
                    log.info("%s: moved %d cached responses to the current layout", self.path, moved)
                self._read.execute("SELECT 1 FROM entries LIMIT 1").fetchall()
                return
            except sqlite3.DatabaseError as exc:
                if attempt or not _is_damage(exc):
                    raise
                self._set_aside(exc)

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
        """Set the damaged file aside and open a fresh one (the caller holds neither lock)."""
        with self._write_lock, self._read_lock:
            self._set_aside(exc)
            self._open()

    def _recovered(self, lock: threading.Lock, work: Callable[[], None]) -> bool:
        """Run ``work`` under ``lock``; on a damaged file, recover (outside the lock) and say so."""
        damaged = None
        with lock:
            try:
                work()
            except sqlite3.DatabaseError as exc:
                if not _is_damage(exc):
                    raise
                damaged = exc
        if damaged is not None:
            self._recover(damaged)
        return damaged is not None

    # ------------------------------------------------------------------ reads
    def get_many(self, keys: list[str], unusable: bool = False) -> dict[str, ChatResponse]:
        """The cached responses among ``keys`` (marked cached=True), by key; entries marked unusable only
        with ``unusable`` (a backend whose replies cannot change under the same identity)."""
        found: dict[str, ChatResponse] = {}
        unique = sorted(set(keys))
        rows: list[tuple[bytes, str]] = []
        blobs = [bytes.fromhex(k) for k in unique]
        missing = []
        with self._pending_lock:
            for blob in blobs:
                pending = self._pending.get(blob)
                if pending is not None:
                    rows.append((blob, pending[2]))
                else:
                    missing.append(blob)

        usable = "" if unusable else " AND outcome IS NULL"

        def read() -> None:
            for start in range(0, len(missing), CHUNK):
                chunk = missing[start : start + CHUNK]
                marks = ",".join("?" * len(chunk))
                rows.extend(
                    self._read.execute(
                        f"SELECT key, response FROM entries WHERE key IN ({marks}){usable}", chunk
                    )
                )

        self._recovered(self._read_lock, read)  # a damaged file: what was read so far, the rest missed
        for blob, record in rows:
            found[bytes(blob).hex()] = _response(record)
        return found

    def get(self, key: str, unusable: bool = False) -> ChatResponse | None:
        return self.get_many([key], unusable).get(key)

    # ------------------------------------------------------------------ writes
    def put_many(
        self,
        items: list[tuple[str, str, str, ChatResponse]],
        on_stored: Callable[[dict[str, ChatResponse]], None] | None = None,
    ) -> None:
        """Queue (key, backend, identity, response) rows for the writer; the first recorded response of
        a key wins (an unusable entry is replaced). ``on_stored`` is called once they are committed
        (on the writer's thread) with, by key, the reply the cache holds where it is not the one given
        (another process or call stored first); ``{}`` when every given reply was stored."""
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
                    _RECORD(record).decode(),
                )
            )
        if not rows:
            if on_stored is not None:
                on_stored({})
            return
        with self._pending_lock:
            for blob, backend, identity, record in rows:
                self._pending.setdefault(blob, (backend, identity, record))
        self._enqueue(Rows(rows, on_stored))

    def store(self, items: list[tuple[str, str, str, ChatResponse]]) -> dict[str, ChatResponse]:
        """``put_many`` and wait for the commit; returns, by key, the replies the cache holds instead of
        the given ones (stored first by another process)."""
        done, out = threading.Event(), {}

        def stored(lost: dict[str, ChatResponse]) -> None:
            out.update(lost)
            done.set()

        self.put_many(items, on_stored=stored)
        done.wait()
        return out

    def mark_unusable(self, keys: list[str], reason: str) -> None:
        """Record that the replies of ``keys`` could not be used (``reason``: e.g. parse_error): later
        lookups miss them, so a later run asks again; the entries stay (``factory cache list``) until a
        new reply replaces them."""
        blobs = [bytes.fromhex(k) for k in dict.fromkeys(keys)]
        if not blobs:
            return
        with self._pending_lock:  # answered from memory no more
            for blob in blobs:
                self._pending.pop(blob, None)
        self._enqueue(Mark(blobs, f"unusable:{reason}"))

    def _enqueue(self, item: object) -> None:
        with self._done:
            self._queued += 1
        self._queue.put(item)

    def then(self, action: Callable[[], None]) -> None:
        """Run ``action`` (on the writer's thread) once every response queued before it is committed:
        what must never be on disk ahead of its replies (a journaled record) waits for them. An
        error of ``action`` is raised by the next ``flush``."""
        self._enqueue(action)

    def _write_loop(self) -> None:
        while True:
            batches = [self._queue.get()]
            if batches[0] is not None:
                # the window: replies arrive one at a time, and a commit (and the thread's wake-up)
                # per reply cost ~5x the CPU of the commit itself; a sleep is not woken by puts
                time.sleep(self.commit_window_s)
            while True:  # everything queued meanwhile goes into the same commit
                try:
                    batches.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = any(b is None for b in batches)
            writes = [b for b in batches if isinstance(b, (Rows, Mark))]
            if writes:
                try:
                    self._commit(writes)
                except BaseException as exc:  # noqa: BLE001 — raised by flush; the writer goes on
                    self._action_error = self._action_error or exc
            for item in batches:
                if isinstance(item, Rows) and item.on_stored is not None:
                    item.on_stored({blob.hex(): _response(record) for blob, record in item.lost.items()})
                elif callable(item) and self._action_error is None:
                    try:
                        item()
                    except BaseException as exc:  # noqa: BLE001 — raised by flush, in the caller's thread
                        self._action_error = exc
            with self._done:
                self._committed += sum(1 for b in batches if b is not None)
                self._done.notify_all()
            if stop:
                return

    def _commit(self, writes: list[Rows | Mark]) -> None:
        """The queued inserts and marks, in queue order, in one transaction."""

        def write() -> None:
            self._write.execute("BEGIN IMMEDIATE")
            try:
                sql.apply(self._write, self._identities, writes, self.stage)
                self._adopt(writes)
                self._write.execute("COMMIT")
            except BaseException:
                self._write.execute("ROLLBACK")
                raise

        if self._recovered(self._write_lock, write):
            self._commit(writes)  # into the fresh file
            return
        with self._pending_lock:
            for item in writes:
                for blob, *_ in getattr(item, "rows", ()):
                    self._pending.pop(blob, None)

    def _adopt(self, writes: list[Rows | Mark]) -> None:
        """Before the commit: a reader in this process meanwhile gets the reply that stays."""
        with self._pending_lock:
            for item in writes:
                for blob, winner in getattr(item, "lost", {}).items():
                    if blob in self._pending:
                        backend, identity, _ = self._pending[blob]
                        self._pending[blob] = (backend, identity, winner)

    def flush(self) -> None:
        """Wait until every queued response is committed."""
        with self._done:
            target = self._queued
            self._done.wait_for(lambda: self._committed >= target)
        if self._action_error is not None:
            error, self._action_error = self._action_error, None
            raise error

    def __len__(self) -> int:
        self.flush()
        with self._read_lock:
            return self._read.execute("SELECT COUNT(*) FROM entries").fetchone()[0]

    def close(self) -> None:
        if self._writer.is_alive():
            self._queue.put(None)
            self._writer.join()
        with self._write_lock, self._read_lock:
            self._read.close()
            self._write.close()


def _response(record: str) -> ChatResponse:
    return ChatResponse(**json.loads(record), cached=True)


def _is_damage(exc: sqlite3.DatabaseError) -> bool:
    """A damaged file (corrupt, truncated, not a database), as opposed to a full disk or a lock."""
    name = getattr(exc, "sqlite_errorname", "")
    return name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or type(exc) is sqlite3.DatabaseError


def _close_at_exit(ref: weakref.ref) -> None:
    cache = ref()
    if cache is not None and cache._writer.is_alive():
        cache.close()
