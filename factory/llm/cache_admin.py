"""`factory cache list|drop`: the response cache's entries by model, stage, outcome and date.

An entry records who stored it (the stage, from ``FACTORY_STAGE``), when, for which backend and model
identity, and its outcome: ``ok``, or ``unusable:<reason>`` once the agent could not use its reply (a
later run asks such calls again by itself). ``list`` counts the entries per (model, stage, outcome)
with the dates they were stored; ``drop`` deletes the entries that match every filter given, so the
calls are asked again: e.g. a server's replies from before it was fixed (``--model ... --before ...``).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path

from factory.utils import paths
from factory.utils.errors import FactoryError

DEFAULT_CACHE = paths.CACHE_DIR / "responses.sqlite"
NO_STAGE = "-"  # how an entry stored outside a stage (or before stages were recorded) is listed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``list`` and ``drop`` actions and their filters."""
    actions = parser.add_subparsers(dest="action", required=True, metavar="<list|drop>")
    for name, text in (
        ("list", "count the entries per model, stage and outcome (with the dates they were stored)"),
        ("drop", "delete the entries that match every filter given (at least one): a later run asks again"),
    ):
        p = actions.add_parser(name, help=text, description=text)
        p.add_argument("--cache", default=str(DEFAULT_CACHE), help=f"the file (default: {DEFAULT_CACHE})")
        p.add_argument("--model", help="entries whose backend or model identity contains this text")
        p.add_argument("--stage", help=f"entries stored by this stage (e.g. trajectories; {NO_STAGE}: none)")
        p.add_argument("--outcome", help="ok, unusable, or unusable:<reason> (e.g. unusable:parse_error)")
        p.add_argument("--before", help="entries stored before this UTC date or time (e.g. 2026-12-06)")
        p.add_argument("--debug", action="store_true", help="show tracebacks")


def run_command(args: argparse.Namespace) -> int:
    """``factory cache list`` prints a table; ``factory cache drop`` says how many entries went."""
    where, values = conditions(args.model, args.stage, args.outcome, args.before)
    db = _open(Path(args.cache))
    try:
        if args.action == "list":
            sys.stdout.write(render(listing(db, where, values), args.cache))
            return 0
        if not values and not where:
            raise FactoryError(
                "drop: name at least one of --model, --stage, --outcome, --before (to drop "
                f"every entry, delete {args.cache})"
            )
        n = drop(db, where, values)
        print(f"factory cache: dropped {n} entries of {args.cache}", file=sys.stderr)
        return 0
    finally:
        db.close()


def conditions(
    model: str | None, stage: str | None, outcome: str | None, before: str | None
) -> tuple[list[str], list]:
    """SQL conditions on ``entries e JOIN identities i`` for the filters given, and their values."""
    where: list[str] = []
    values: list = []
    if model:
        where.append("(instr(i.identity, ?) > 0 OR instr(i.backend, ?) > 0)")
        values += [model, model]
    if stage == NO_STAGE:
        where.append("e.stage IS NULL")
    elif stage:
        where.append("e.stage = ?")
        values.append(stage)
    if outcome == "ok":
        where.append("e.outcome IS NULL")
    elif outcome == "unusable":
        where.append("e.outcome LIKE 'unusable:%'")
    elif outcome and outcome.startswith("unusable:"):
        where.append("e.outcome = ?")
        values.append(outcome)
    elif outcome:
        raise FactoryError(
            f"--outcome {outcome!r}: expected ok, unusable or unusable:<reason> (e.g. unusable:parse_error)"
        )
    if before:
        where.append("e.created < ?")
        values.append(_timestamp(before))
    return where, values


def _timestamp(text: str) -> float:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise FactoryError(
            f"--before {text!r}: expected an ISO date or time, e.g. 2026-12-06 or 2026-12-06T14:30 (UTC)"
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _open(path: Path) -> sqlite3.Connection:
    """The cache file, brought to the current layout (a file of an earlier one gains its columns)."""
    if not path.is_file():
        raise FactoryError(
            f"no response cache at {path}: a stage writes it when llm.cache is on (name another with --cache)"
        )
    from factory.llm.responses import ResponseCache

    ResponseCache(path).close()  # migrates (or sets a damaged file aside, with a warning)
    return sqlite3.connect(path, timeout=60, isolation_level=None)


def _where(where: list[str]) -> str:
    return f"WHERE {' AND '.join(where)}" if where else ""


def listing(db: sqlite3.Connection, where: list[str], values: list) -> list[dict]:
    """One row per (model, stage, outcome): entries, first and last stored (UTC dates)."""
    rows = db.execute(
        "SELECT i.backend, i.identity, e.stage, e.outcome, COUNT(*), MIN(e.created), MAX(e.created) "
        f"FROM entries e JOIN identities i ON i.id = e.identity {_where(where)} "
        "GROUP BY e.identity, e.stage, e.outcome ORDER BY i.identity, e.stage, e.outcome",
        values,
    ).fetchall()
    return [
        {
            "backend": backend,
            "model": identity,
            "stage": stage or NO_STAGE,
            "outcome": outcome or "ok",
            "entries": n,
            "first": _date(first),
            "last": _date(last),
        }
        for backend, identity, stage, outcome, n, first, last in rows
    ]


def _date(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M")


def render(rows: list[dict], cache: str) -> str:
    if not rows:
        return f"no entry of {cache} matches\n"
    lines = ["| entries | outcome | stage | stored (UTC) | backend | model |", "|---|---|---|---|---|---|"]
    for r in rows:
        span = r["first"] if r["first"] == r["last"] else f"{r['first']} – {r['last']}"
        lines.append(
            f"| {r['entries']} | {r['outcome']} | {r['stage']} | {span} | {r['backend']} | {r['model']} |"
        )
    return "\n".join(lines) + "\n"


def drop(db: sqlite3.Connection, where: list[str], values: list) -> int:
    """Delete the matching entries (one transaction); how many went."""
    cursor = db.execute(
        "DELETE FROM entries WHERE rowid IN (SELECT e.rowid FROM entries e JOIN identities i "
        f"ON i.id = e.identity {_where(where)})",
        values,
    )
    return cursor.rowcount
