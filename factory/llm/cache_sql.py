"""The response cache file's layout and writes (SQL on the writer's connection, for ``ResponseCache``).

``entries`` holds one row per key: the identity (a row of ``identities``), the response as JSON, when and
by which stage it was stored, and its outcome (NULL: ok; ``unusable:<reason>`` once marked). Files of
earlier layouts are brought up to date on open: the first one's ``responses`` table moves over, and
the stage and outcome columns are added to a file without them.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field

CHUNK = 500  # SQLite host-parameter budget per query
COLUMNS = {"stage": "TEXT", "outcome": "TEXT"}  # added to files of earlier layouts on open


@dataclass
class Rows:
    """One ``put_many``'s rows, and who to tell which of them lost to a reply stored first."""

    rows: list[tuple[bytes, str, str, str]]  # (key, backend, identity, record)
    on_stored: Callable | None
    lost: dict[bytes, str] = field(default_factory=dict)  # key -> the record the cache holds instead


@dataclass
class Mark:
    """``mark_unusable``: set the outcome of these keys (in queue order with the inserts)."""

    blobs: list[bytes]
    outcome: str


def create(db: sqlite3.Connection) -> None:
    """The tables, and the columns a file of an earlier layout lacks (its entries: ok, stage unknown)."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS identities (id INTEGER PRIMARY KEY, backend TEXT NOT NULL, "
        "identity TEXT NOT NULL, UNIQUE (backend, identity))"
    )
    db.execute(
        "CREATE TABLE IF NOT EXISTS entries (key BLOB NOT NULL UNIQUE, identity INTEGER NOT NULL, "
        "response TEXT NOT NULL, created REAL NOT NULL, stage TEXT, outcome TEXT)"
    )
    have = {row[1] for row in db.execute("PRAGMA table_info(entries)")}
    for name, kind in COLUMNS.items():
        if name not in have:
            db.execute(f"ALTER TABLE entries ADD COLUMN {name} {kind}")


def migrate_first_layout(db: sqlite3.Connection, identities: dict) -> int | None:
    """Entries of the first layout (table ``responses``, hex text keys) move to ``entries``: how many."""
    if not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'responses'").fetchall():
        return None
    rows = db.execute("SELECT key, backend, identity, response, created FROM responses").fetchall()
    db.execute("BEGIN IMMEDIATE")
    try:
        insert(db, identities, [(bytes.fromhex(k), b, i, r, c) for k, b, i, r, c in rows], None, ignore=True)
        db.execute("DROP TABLE responses")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return len(rows)


def apply(db: sqlite3.Connection, identities: dict, writes: list[Rows | Mark], stage: str | None) -> None:
    """Inside a transaction (the file's write lock held, so no other process stores meanwhile):
    consecutive inserts as one group, a mark between them where it was queued."""
    group: list[Rows] = []
    for item in [*writes, None]:
        if isinstance(item, Rows):
            item.lost.clear()  # a retry into a fresh file starts over
            group.append(item)
            continue
        if group:
            _insert_new(db, identities, group, stage)
            group = []
        if isinstance(item, Mark):
            for start in range(0, len(item.blobs), CHUNK):
                chunk = item.blobs[start : start + CHUNK]
                db.execute(
                    f"UPDATE entries SET outcome = ? WHERE key IN ({','.join('?' * len(chunk))})",
                    [item.outcome, *chunk],
                )


def _insert_new(db: sqlite3.Connection, identities: dict, group: list[Rows], stage: str | None) -> None:
    """Store the group's rows whose key holds no usable reply yet; the others lose to the one held (the
    reply of its key stored first, by this process or another). Keys are looked up again only when
    fewer rows went in than were given: the common case costs the insert alone."""
    now, rows, first = time.time(), [], {}
    for item in group:
        for blob, backend, identity, record in item.rows:
            if blob not in first:  # a key given twice: the first wins here too
                first[blob] = record
                rows.append((blob, backend, identity, record, now))
    if insert(db, identities, rows, stage) == len(rows):
        held = first
    else:
        held = {}
        for start in range(0, len(rows), CHUNK):
            chunk = [row[0] for row in rows[start : start + CHUNK]]
            marks = ",".join("?" * len(chunk))
            held.update(db.execute(f"SELECT key, response FROM entries WHERE key IN ({marks})", chunk))
    for item in group:
        for blob, _, _, record in item.rows:
            if held[blob] != record:
                item.lost[blob] = held[blob]


def insert(
    db: sqlite3.Connection, identities: dict, rows: list[tuple], stage: str | None, ignore: bool = False
) -> int:
    """(key, backend, identity, record, created) rows (distinct keys) into ``entries`` (inside a
    transaction); a key's entry is kept if usable, else replaced (unless ``ignore``: kept). Returns
    the rows that went in. ``identities``: (backend, identity) -> id, filled as ids are made."""
    values = []
    for blob, backend, identity, record, created in rows:
        ident = identities.get((backend, identity))
        if ident is None:
            db.execute(
                "INSERT OR IGNORE INTO identities (backend, identity) VALUES (?, ?)", (backend, identity)
            )
            ident = db.execute(
                "SELECT id FROM identities WHERE backend = ? AND identity = ?", (backend, identity)
            ).fetchone()[0]
            identities[(backend, identity)] = ident
        values.append((blob, ident, record, created, stage))
    conflict = "NOTHING" if ignore else REPLACE_UNUSABLE
    written = 0
    # one statement per chunk, not one step per row: each step hands the GIL to another thread
    for start in range(0, len(values), CHUNK // 5):
        chunk = values[start : start + CHUNK // 5]
        marks = ",".join(["(?, ?, ?, ?, ?, NULL)"] * len(chunk))
        written += db.execute(
            f"INSERT INTO entries (key, identity, response, created, stage, outcome) VALUES {marks} "
            f"ON CONFLICT (key) DO {conflict}",
            [v for row in chunk for v in row],
        ).rowcount
    return written


# An unusable entry is replaced by a new reply, unless the new one says word for word what it said: then
# the stored reply stays (its latency and token counts too) and the caller adopts it, so a deterministic
# server asked again replays to the same bytes (and the entry stays unusable, asked again next time).
REPLACE_UNUSABLE = (
    "UPDATE SET identity = excluded.identity, response = excluded.response, created = excluded.created, "
    "stage = excluded.stage, outcome = NULL WHERE entries.outcome IS NOT NULL "
    "AND json_extract(entries.response, '$.text') IS NOT json_extract(excluded.response, '$.text')"
)
