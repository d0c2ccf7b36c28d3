"""What every dataset builder shares: reading official files, field checks, passage ids, routes.

A builder turns one raw record into a Question row (DESIGN §8, assembled by
``factory.corpora.question.make_question``) whose passages are entries of a ``PassagePool``, or raises
``BadRecord`` naming the record and the field. Passage ids are a stable hash of (dataset, title,
text), so the same paragraph gets the same pid in every question and every run.
"""

from __future__ import annotations

import hashlib
import mmap
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from factory.errors import BadRecord, FactoryError

_NON_SPACE = re.compile(rb"\S")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z0-9\"'(\[])")


def read_json_records(path: str | Path, record_type: type | None = None) -> Iterator[tuple[str, Any]]:
    """Yield (location, record) from a JSON list or a JSONL file, with clear errors for bad files.

    With ``record_type`` (a ``msgspec.Struct`` of the official format) a JSON list is first decoded
    typed: twice as fast, and every field's type is checked in C. One record that does not fit the
    type sends the whole file down the untyped path, where the builder checks field by field and
    names the bad record.
    """
    path = Path(path)
    if not path.exists():
        raise FactoryError(f"corpus file {path} does not exist (check corpora.* in params.yaml)")
    if path.stat().st_size == 0:
        return
    with path.open("rb") as fh:  # mapped, not read: no copy of a big file (the mapping outlives fh)
        data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    first = _NON_SPACE.search(data)
    if first and data[first.start() : first.start() + 1] == b"[":
        records = None
        try:
            if record_type is not None:
                try:
                    records = msgspec.json.decode(data, type=list[record_type])
                except msgspec.ValidationError:
                    pass  # some record is malformed: the untyped path below names it
            if records is None:
                records = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise FactoryError(f"{path}: not valid JSON: {_locate(exc, data)}") from None
        for i, record in enumerate(records):
            yield f"{path.name}[{i}]", record
        return
    for lineno, line in enumerate(iter(data.readline, b""), 1):
        if not line.strip():
            continue
        try:
            record = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise FactoryError(f"{path}: line {lineno} is not valid JSON ({exc})") from None
        yield f"{path.name}:{lineno}", record


def _locate(exc: msgspec.DecodeError, data: bytes | mmap.mmap) -> str:
    match = re.search(r"byte (\d+)", str(exc))
    if not match:
        return str(exc)
    offset = int(match.group(1))
    line = data[:offset].count(b"\n") + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"{exc} (line {line}, column {col}, byte offset {offset})"


def pid_for(dataset: str, title: str, text: str) -> str:
    digest = hashlib.blake2b(f"{title}\n{text}".encode(), digest_size=8).hexdigest()
    return f"{dataset}:{digest}"


def split_sentences(text: str) -> list[str]:
    """Deterministic rule-based sentence split for corpora that ship paragraphs (MuSiQue)."""
    pieces = [p.strip() for p in _SENTENCE_END.split(text.strip())]
    return [p for p in pieces if p] or [text.strip()]


class RecordRef:
    """Which record this is (dataset, id, location in its file), for errors that name it."""

    def __init__(self, dataset: str, record_id: str, where: str):
        self.dataset, self.id, self.where = dataset, record_id, where

    def fail(self, field: str, reason: str) -> None:
        raise BadRecord(self.dataset, self.id, field, reason, self.where)


class RecordReader(RecordRef):
    """Typed field access for one raw (untyped) record; every failure names the record and the field."""

    def __init__(self, dataset: str, record: Any, where: str, id_key: str):
        super().__init__(dataset, "?", where)
        if not isinstance(record, dict):
            raise BadRecord(
                dataset, "?", "<record>", f"expected a JSON object, got {type(record).__name__}", where
            )
        self.record = record
        raw_id = record.get(id_key)
        self.id = str(raw_id) if raw_id is not None else "?"
        if not isinstance(raw_id, str) or not raw_id.strip():
            self.fail(id_key, "missing or not a non-empty string")

    def get(self, key: str, typ: type | tuple[type, ...], optional: bool = False) -> Any:
        if key not in self.record or self.record[key] is None:
            if optional:
                return None
            self.fail(key, "missing")
        value = self.record[key]
        if not isinstance(value, typ) or isinstance(value, bool) and typ is not bool:
            self.fail(key, f"expected {_tname(typ)}, got {type(value).__name__}")
        return value

    def text(self, key: str) -> str:
        value = self.get(key, str)
        if not value.strip():
            self.fail(key, "empty")
        return value

    def pairs(self, key: str, first: type, second: type) -> list[tuple[Any, Any]]:
        """A list of 2-element lists like [title, sent_idx] or [title, [sentences]]."""
        out = []
        for i, item in enumerate(self.get(key, list)):
            if not (isinstance(item, (list, tuple)) and len(item) == 2):
                self.fail(f"{key}[{i}]", "expected a [x, y] pair")
            a, b = item
            if not isinstance(a, first) or isinstance(b, bool) or not isinstance(b, second):
                self.fail(f"{key}[{i}]", f"expected [{_tname(first)}, {_tname(second)}]")
            out.append((a, b))
        return out


def _tname(typ: type | tuple[type, ...]) -> str:
    if isinstance(typ, tuple):
        return " or ".join(t.__name__ for t in typ)
    return {"str": "string", "int": "integer", "list": "list", "dict": "object"}.get(
        typ.__name__, typ.__name__
    )
