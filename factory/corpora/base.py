"""What every dataset builder shares: reading official files, field checks, passage ids, routes.

A builder turns one raw record into a Question row (DESIGN §8) plus its passages, or raises
``BadRecord`` naming the record and the field. Passage ids are a stable hash of (dataset, title,
text), so the same paragraph gets the same pid in every question and every run.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from factory.errors import BadRecord, FactoryError
from factory.text import normalize_question

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
    data = path.read_bytes()
    head = data.lstrip()[:1]
    if head == b"[":
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
        del data
        for i, record in enumerate(records):
            yield f"{path.name}[{i}]", record
        return
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = msgspec.json.decode(line)
        except msgspec.DecodeError as exc:
            raise FactoryError(f"{path}: line {lineno} is not valid JSON ({exc})") from None
        yield f"{path.name}:{lineno}", record


def _locate(exc: msgspec.DecodeError, data: bytes) -> str:
    match = re.search(r"byte (\d+)", str(exc))
    if not match:
        return str(exc)
    offset = int(match.group(1))
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return f"{exc} (line {line}, column {col}, byte offset {offset})"


def pid_for(dataset: str, title: str, text: str) -> str:
    digest = hashlib.blake2b(f"{title}\n{text}".encode(), digest_size=8).hexdigest()
    return f"{dataset}:{digest}"


def join_sentences(sentences: list[str]) -> str:
    """HotpotQA sentences keep their leading space; 2Wiki's do not. Join both into readable text."""
    parts: list[str] = []
    for s in sentences:
        if parts and s and not s[0].isspace():
            parts.append(" ")
        parts.append(s)
    return "".join(parts).strip()


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
            raise BadRecord(dataset, "?", "<record>", f"expected a JSON object, got {type(record).__name__}", where)
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
    return {"str": "string", "int": "integer", "list": "list", "dict": "object"}.get(typ.__name__, typ.__name__)


def make_question(
    reader: RecordRef,
    *,
    question: str,
    answers: list[str],
    qtype: str,
    route: str,
    hops: int,
    context: list[tuple[str, list[str]]],
    supporting: list[tuple[str, int]] | None = None,
    supporting_idx: list[int] | None = None,
    level: str | None = None,
    evidences: list[dict] | None = None,
    decomposition: list[dict] | None = None,
    source_file: str,
    texts: list[str] | None = None,
    cache: dict | None = None,
) -> tuple[dict, list[tuple[str, str, str, list[str]]]]:
    """Assemble a Question row and its paragraphs as (pid, title, text, sentences); checks answers
    and supporting facts.

    ``supporting`` gives (title, sentence index) facts; ``supporting_idx`` gives supporting
    paragraph positions instead (MuSiQue, recorded with sent_idx = -1). ``cache`` maps a paragraph
    to its (pid, text) across records: corpora repeat paragraphs in many questions' contexts.
    """
    dataset = reader.dataset
    answers = [a for a in answers if isinstance(a, str)]
    if not answers or not answers[0].strip():
        reader.fail("answer", "empty answer")
    cache = {} if cache is None else cache
    paragraphs, refs = [], []
    first_by_title: dict[str, int] = {}
    for i, (title, sentences) in enumerate(context):
        # one joined string is cheaper to hash than a tuple of fresh strings (and join type-checks them)
        key = (dataset, title, texts[i] if texts is not None else "\x1f".join(sentences))
        hit = cache.get(key)
        if hit is None:
            text = texts[i] if texts is not None else join_sentences(sentences)
            hit = cache[key] = (pid_for(dataset, title, text), text)
        paragraphs.append((hit[0], title, hit[1], sentences))
        refs.append({"pid": hit[0], "title": title, "sentences": sentences})
        first_by_title.setdefault(title, i)
    support_rows = []
    for title, idx in supporting or []:
        pos = first_by_title.get(title)
        if pos is None:
            reader.fail("supporting_facts", f"title {title!r} is not in the record's context")
        if not 0 <= idx < len(context[pos][1]):
            reader.fail(
                "supporting_facts",
                f"sentence index {idx} is out of range for {title!r} ({len(context[pos][1])} sentences)",
            )
        support_rows.append({"title": title, "sent_idx": idx, "pid": refs[pos]["pid"]})
    for pos in supporting_idx or []:
        support_rows.append({"title": context[pos][0], "sent_idx": -1, "pid": refs[pos]["pid"]})
    if not support_rows:
        reader.fail("supporting_facts", "no supporting facts")
    row = {
        "question_id": f"{dataset}/{reader.id}",
        "dataset": dataset,
        "source_id": reader.id,
        "split": "",  # assigned once every record is read (see factory.splits)
        "question": question,
        "question_norm": normalize_question(question),
        "answers": answers,
        "qtype": qtype,
        "level": level,
        "route": route,
        "hops": hops,
        "passages": refs,
        "supporting": support_rows,
        "evidences": evidences,
        "decomposition": decomposition,
        "source_file": source_file,
    }
    return row, paragraphs
