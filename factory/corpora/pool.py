"""The paragraphs of one ingest run, each stored once, and every question's pool as indices into them.

Corpora repeat paragraphs across questions (HotpotQA distractors, 2Wiki's entity pages), so a
paragraph is keyed by its content as read and turned into Python strings, a text and a pid only
the first time: later occurrences cost one dictionary lookup. For typed official records the
sentences stay raw JSON, so a repeated paragraph is never even decoded. A question stores the
indices of its paragraphs; ``passages_table`` and ``question_batches`` (factory.corpora.table) turn
them into Arrow columns by index, in C++.

Two entries may share a pid (equal title and text, different sentence splits): each question keeps
its own sentences, and the passages table keeps the first entry of each pid.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import msgspec
import numpy as np
import pyarrow as pa

from factory.corpora.base import RecordRef, pid_for, split_sentences
from factory.utils.text import join_sentences
from schemas import PASSAGE

_SENTENCES = msgspec.json.Decoder(list[str])


class PassagePool:
    """Distinct paragraphs ("entries") with their pid, dataset, title, text and sentences."""

    def __init__(self) -> None:
        self.pids: list[str] = []
        self.datasets: list[str] = []
        self.titles: list[str] = []
        self.texts: list[str] = []
        self.sentences: list[list[str]] = []
        self.blank: set[int] = set()  # entries without text or sentences (their records are quarantined)
        self._keys: dict[str, dict] = {}  # dataset -> content key -> entry index
        # dataset -> title -> raw sentences and entry of the first paragraph seen with that title
        self._raw_by_title: dict[str, dict[str, msgspec.Raw]] = {}
        self._entry_by_title: dict[str, dict[str, int]] = {}

    def __len__(self) -> int:
        return len(self.pids)

    def _add(self, dataset: str, title: str, text: str, sentences: list[str]) -> int:
        self.pids.append(pid_for(dataset, title, text))
        self.datasets.append(dataset)
        self.titles.append(title)
        self.texts.append(text)
        self.sentences.append(sentences)
        if not text or not sentences:
            self.blank.add(len(self.pids) - 1)
        return len(self.pids) - 1

    def raw(self, ref: RecordRef, titles: Sequence[str], sentences: Sequence[msgspec.Raw]) -> list[int]:
        """Entries of paragraphs given as titles and their sentences as raw JSON (typed official
        records). A paragraph seen before is found by its title and compared byte for byte, never
        decoded again; when all of a record's paragraphs were seen, that takes C-level calls only."""
        raw_of = self._raw_by_title.setdefault(ref.dataset, {})
        entry_of = self._entry_by_title.setdefault(ref.dataset, {})
        if tuple(map(raw_of.get, titles)) == tuple(sentences):  # Raw == Raw is one memcmp
            return list(map(entry_of.__getitem__, titles))
        keys = self._keys.setdefault(ref.dataset, {})
        entries = []
        for i, (title, raw) in enumerate(zip(titles, sentences, strict=True)):
            if raw_of.get(title) == raw:
                entries.append(entry_of[title])
                continue
            key = (title, bytes(raw))  # a first sight, or the same title with other sentences
            entry = keys.get(key)
            if entry is None:
                try:
                    decoded = _SENTENCES.decode(raw)
                except msgspec.ValidationError as exc:
                    ref.fail(f"context[{i}]", f"sentences must be a list of strings ({exc})")
                entry = keys[key] = self._add(ref.dataset, title, join_sentences(decoded), decoded)
            if title not in raw_of:
                raw_of[title], entry_of[title] = raw, entry
            entries.append(entry)
        return entries

    def pairs(self, dataset: str, context: Sequence[tuple[str, list[str]]]) -> list[int]:
        """Entries of (title, sentences) paragraphs already checked as strings (untyped records)."""
        keys = self._keys.setdefault(dataset, {})
        entries = []
        for title, sentences in context:
            key = (title, "\x1f".join(sentences))  # one joined string hashes faster than a tuple of them
            entry = keys.get(key)
            if entry is None:
                entry = keys[key] = self._add(dataset, title, join_sentences(sentences), sentences)
            entries.append(entry)
        return entries

    def texts_of(self, dataset: str, paragraphs: Sequence[tuple[str, str]]) -> list[int]:
        """Entries of (title, text) paragraphs of corpora that ship no sentences (MuSiQue); the
        rule-based sentence split runs once per distinct paragraph."""
        keys = self._keys.setdefault(dataset, {})
        entries = []
        for title, text in paragraphs:
            entry = keys.get((title, text))
            if entry is None:
                entry = keys[(title, text)] = self._add(dataset, title, text.strip(), split_sentences(text))
            entries.append(entry)
        return entries

    def columns(self) -> dict[str, pa.Array]:
        """pid, title and sentences of every entry as Arrow arrays (what questions take by index)."""
        return {
            "pid": pa.array(self.pids, pa.string()),
            "title": pa.array(self.titles, pa.string()),
            "sentences": pa.array(self.sentences, pa.list_(pa.string())),
        }

    def passages_table(self, pools: list[list[int]]) -> pa.Table:
        """The Passage table: one row per pid referenced by ``pools`` (the kept questions' entry
        lists), in order of first reference. Entries only quarantined records used are left out."""
        flat = np.fromiter(chain.from_iterable(pools), dtype=np.int64)
        entries, first = np.unique(flat, return_index=True)
        seen: set[str] = set()
        rows = []
        for entry in entries[np.argsort(first, kind="stable")].tolist():
            pid = self.pids[entry]
            if pid not in seen:
                seen.add(pid)
                rows.append(entry)
        return pa.Table.from_arrays(
            [
                pa.array([self.pids[e] for e in rows], pa.string()),
                pa.array([self.datasets[e] for e in rows], pa.string()),
                pa.array([self.titles[e] for e in rows], pa.string()),
                pa.array([self.texts[e] for e in rows], pa.string()),
                pa.array([self.sentences[e] for e in rows], pa.list_(pa.string())),
            ],
            schema=PASSAGE,
        )
