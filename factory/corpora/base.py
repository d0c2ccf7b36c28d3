"""What every dataset builder shares: field checks, passage ids, sentence splits (files are read by
``factory.corpora.files``).

A builder turns one raw record into a Question row (docs/design.md §8, assembled by
``factory.corpora.question.make_question``) whose passages are entries of a ``PassagePool``, or raises
``BadRecord`` naming the record and the field. Passage ids are a stable hash of (dataset, title,
text), so the same paragraph gets the same pid in every question and every run.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from factory.utils.errors import BadRecord

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]?\s+(?=[A-Z0-9\"'(\[])")


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
