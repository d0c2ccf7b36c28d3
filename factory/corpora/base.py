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

    A JSON list is mapped, not read, and split into its records' raw bytes in one C pass (msgspec
    ``Raw``: views into the mapping, no objects built); each record is then decoded alone, so memory
    holds one record at a time, and the mapping's pages are given back as the records are consumed
    (a 566 MB HotpotQA file does not sit in memory). With ``record_type`` (a ``msgspec.Struct`` of
    the official format) a record is decoded typed, every field's type checked in C; a record that
    does not fit the type is decoded untyped, and the builder checks it field by field and names
    what is wrong. A JSONL file is read line by line.
    """
    path = Path(path)
    if not path.exists():
        raise FactoryError(f"corpus file {path} does not exist (check corpora.* in params.yaml)")
    if path.stat().st_size == 0:
        return
    with path.open("rb") as fh:
        head = fh.read(1 << 16)
    first = _NON_SPACE.search(head)
    if first and head[first.start() : first.start() + 1] == b"[":
        yield from _json_list(path, record_type)
        return
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                record = msgspec.json.decode(line)
            except msgspec.DecodeError as exc:
                raise FactoryError(f"{path}: line {lineno} is not valid JSON ({exc})") from None
            yield f"{path.name}:{lineno}", record


_RELEASE_EVERY = 4096  # records between giving the mapping's pages back


def _json_list(path: Path, record_type: type | None) -> Iterator[tuple[str, Any]]:
    with path.open("rb") as fh:  # the mapping outlives fh
        data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        raws = msgspec.json.decode(data, type=list[msgspec.Raw])
    except msgspec.DecodeError as exc:
        raise FactoryError(f"{path}: not valid JSON: {_locate(exc, data)}") from None
    except msgspec.ValidationError as exc:
        raise FactoryError(f"{path}: expected a JSON list of records ({exc})") from None
    release = getattr(mmap, "MADV_DONTNEED", None)
    typed = msgspec.json.Decoder(record_type) if record_type is not None else None
    for i, raw in enumerate(raws):
        if release is not None and i % _RELEASE_EVERY == 0:
            data.madvise(release)  # clean file pages: dropped from this process, re-read from the page cache
        record = None
        if typed is not None:
            try:
                record = typed.decode(raw)
            except msgspec.ValidationError:
                pass  # a malformed record: the untyped path below lets the builder name what is wrong
        if record is None:
            record = msgspec.json.decode(raw)
        raws[i] = None  # the record's bytes are no longer needed
        yield f"{path.name}[{i}]", record


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
