"""Gate of the ingest stage: questions and passages.

``IngestChecks`` computes the checked columns a chunk of questions at a time (cross-field checks
become boolean columns; ``passages_known`` checks the written questions against the written passages;
``dataset_known``, every row's dataset against factory.corpora's registry, so that the suite holds no
list of datasets);
``ingest_expectations`` names what each frame must meet. They are separate so that the stage can
run the gate in a child process (``validators.BackgroundGate``) while it builds the tables. The
split checks (``validators.leakage``) run here: official dev questions are test questions and only
they are; no train question shares its normalised text with a held-out one.
"""

from __future__ import annotations

from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from factory.corpora import names
from factory.corpora.pool import PassagePool
from factory.corpora.question import MAX_HOPS, MIN_HOPS
from factory.utils.splits import OFFICIAL_SPLITS, SPLITS
from validators.leakage import split_follows_official, train_text_of_heldout_question

EXPECTATIONS = "validators.ingest:ingest_expectations"


def _found(values: np.ndarray, sorted_universe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(is each value in the sorted array, its position there): ``np.isin`` by binary search,
    several times faster than isin's hashing on millions of keys."""
    if not len(sorted_universe):
        return np.zeros(len(values), bool), np.zeros(len(values), np.int64)
    at = np.minimum(np.searchsorted(sorted_universe, values), len(sorted_universe) - 1)
    return sorted_universe[at] == values, at


def _per_question(n_questions: int, question_of: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """True for the questions none of whose items (``question_of`` their question) is not ``ok``."""
    return np.bincount(question_of[~ok], minlength=n_questions) == 0


def _pool_checks(rows: list[dict], pool: PassagePool) -> dict[str, np.ndarray]:
    """Per question: every supporting fact names a passage of its pool by pid and title
    (``supporting_resolved``) with its sentence index in range (``sent_idx_in_range``). Vectorised
    over all paragraphs."""
    n = len(rows)
    pid_code: dict[str, int] = {}
    title_code: dict[str, int] = {}
    entry_pid = np.array([pid_code.setdefault(p, len(pid_code)) for p in pool.pids], dtype=np.int64)
    entry_title = np.array([title_code.setdefault(t, len(title_code)) for t in pool.titles], dtype=np.int64)
    entry_sentences = np.fromiter(map(len, pool.sentences), dtype=np.int64, count=len(pool))
    n_passages = np.fromiter((len(q["passages"]) for q in rows), dtype=np.int64, count=n)
    entries = np.fromiter(
        chain.from_iterable(q["passages"] for q in rows), dtype=np.int64, count=int(n_passages.sum())
    )
    pool_q = np.repeat(np.arange(n, dtype=np.int64), n_passages)
    facts = [(i, s["pid"], s["title"], s["sent_idx"]) for i, q in enumerate(rows) for s in q["supporting"]]
    fact_q = np.array([f[0] for f in facts], dtype=np.int64)
    fact_pid = np.array([pid_code.get(f[1], -1) for f in facts], dtype=np.int64)
    fact_title = np.array([title_code.get(f[2], -1) for f in facts], dtype=np.int64)
    sent_idx = np.array([f[3] for f in facts], dtype=np.int64)
    # (question, pid) and (question, title) as single integers, to look supporting facts up in pools
    width = np.int64(len(pid_code) + len(title_code) + 1)
    keys, first = np.unique(
        pool_q * width + entry_pid[entries], return_index=True
    )  # a repeated pid: its first occurrence
    found, at = _found(fact_q * width + fact_pid, keys)
    found &= fact_pid >= 0
    title_found = _found(fact_q * width + fact_title, np.sort(pool_q * width + entry_title[entries]))[0] & (
        fact_title >= 0
    )
    limit = np.where(found, entry_sentences[entries[first[at]]] if len(keys) else 0, 0)
    in_range = (sent_idx == -1) | (found & (sent_idx >= 0) & (sent_idx < limit))
    return {
        "n_passages": n_passages,
        "n_supporting": np.bincount(fact_q, minlength=n),
        "supporting_resolved": _per_question(n, fact_q, found & title_found),
        "sent_idx_in_range": _per_question(n, fact_q, in_range),
    }


def passages_known(pool_pids: pa.ListArray | pa.ChunkedArray, passage_pids: np.ndarray) -> np.ndarray:
    """Per question (its pool's pids as a list column): is every pid in the sorted ``passage_pids``
    (bytes)?"""
    pools = pool_pids.combine_chunks() if isinstance(pool_pids, pa.ChunkedArray) else pool_pids
    lengths = pc.list_value_length(pools).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = np.array([p.encode() for p in pools.flatten().to_pylist()], dtype=bytes)
    width = f"S{max(flat.dtype.itemsize, passage_pids.dtype.itemsize, 1)}"  # one width: no truncated compare
    ok = _found(flat.astype(width), passage_pids.astype(width))[0] if len(flat) else np.zeros(0, bool)
    question_of = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    return _per_question(len(lengths), question_of, ok)


class IngestChecks:
    """The gate's columns, a chunk of ingested questions at a time (``add``): each chunk is checked
    against its own pool; ``frames`` then adds the checks that need the whole run (the pools against
    the written passages table, leakage across splits)."""

    QUESTION_COLUMNS = (
        "question_id",
        "dataset",
        "split",
        "official_split",
        "route",
        "question",
        "hops",
        "source_file",
    )

    def __init__(self) -> None:
        self.questions: dict[str, list] = {
            name: [] for name in (*self.QUESTION_COLUMNS, "n_answers", "answer_nonempty")
        }
        self.pool_columns: dict[str, list[np.ndarray]] = {}
        self.norms: list[str] = []
        self.passages: dict[str, list] = {"pid": [], "dataset": [], "text_len": [], "n_sentences": []}

    def add(self, rows: list[dict], pool: PassagePool, passages: pa.Table) -> None:
        for name in self.QUESTION_COLUMNS:
            self.questions[name] += [q[name] for q in rows]
        self.questions["n_answers"] += [len(q["answers"]) for q in rows]
        self.questions["answer_nonempty"] += [
            bool(q["answers"]) and bool(q["answers"][0].strip()) for q in rows
        ]
        self.norms += [q["question_norm"] for q in rows]
        for name, values in _pool_checks(rows, pool).items():
            self.pool_columns.setdefault(name, []).append(values)
        self.passages["pid"] += passages.column("pid").to_pylist()
        self.passages["dataset"] += passages.column("dataset").to_pylist()
        self.passages["text_len"].append(
            pc.utf8_length(passages.column("text")).to_numpy(zero_copy_only=False)
        )
        self.passages["n_sentences"].append(
            pc.list_value_length(passages.column("sentences")).to_numpy(zero_copy_only=False)
        )

    def frames(self, known: np.ndarray) -> dict[str, dict[str, Any]]:
        """The checked columns as dicts (the gate's child makes pandas frames of them, so the stage
        never imports pandas); ``known``: ``passages_known`` of every question, in order."""
        questions = dict(self.questions)
        for name, parts in self.pool_columns.items():
            questions[name] = np.concatenate(parts)
        questions["passages_known"] = known
        questions["dataset_known"] = _known_datasets(self.questions["dataset"])
        splits = [
            {"split": s, "official_split": o, "question_norm": n}
            for s, o, n in zip(self.questions["split"], self.questions["official_split"], self.norms)
        ]
        questions["train_text_of_heldout_question"] = train_text_of_heldout_question(splits)
        questions["split_follows_official"] = split_follows_official(splits)
        passages = {
            "pid": self.passages["pid"],
            "dataset": self.passages["dataset"],
            "dataset_known": _known_datasets(self.passages["dataset"]),
            "text_len": _joined(self.passages["text_len"]),
            "n_sentences": _joined(self.passages["n_sentences"]),
        }
        return {"questions": questions, "passages": passages}


def _known_datasets(datasets: list[str]) -> np.ndarray:
    """Per row: is its dataset one of factory.corpora's registry?"""
    known = set(names())
    return np.fromiter((d in known for d in datasets), dtype=bool, count=len(datasets))


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def ingest_frames(rows: list[dict], pool: PassagePool, passages: pa.Table) -> dict[str, dict[str, Any]]:
    """The gate's columns of Question rows (their ``passages`` are entries of ``pool``) and of the
    Passage table, in one go (``IngestChecks`` of a single chunk)."""
    checks = IngestChecks()
    checks.add(rows, pool, passages)
    pids = pa.array([[pool.pids[e] for e in q["passages"]] for q in rows], pa.list_(pa.string()))
    table_pids = np.sort(np.array([p.encode() for p in passages.column("pid").to_pylist()], dtype=bytes))
    return checks.frames(passages_known(pids, table_pids))


def ingest_expectations(E) -> dict[str, list]:
    """``E``: the ``great_expectations.expectations`` module."""
    questions_suite = [
        E.ExpectColumnValuesToBeUnique(column="question_id"),
        E.ExpectColumnValuesToNotBeNull(column="question"),
        E.ExpectColumnValuesToBeInSet(column="dataset_known", value_set=[True]),
        E.ExpectColumnValuesToBeInSet(column="split", value_set=list(SPLITS)),
        E.ExpectColumnValuesToBeInSet(column="official_split", value_set=list(OFFICIAL_SPLITS)),
        # official train gives train and held-out, official dev gives test: no dev question is trained on
        E.ExpectColumnValuesToBeInSet(column="split_follows_official", value_set=[True]),
        E.ExpectColumnValuesToBeInSet(column="route", value_set=["chain", "parallel"]),
        E.ExpectColumnValuesToBeBetween(column="hops", min_value=MIN_HOPS, max_value=MAX_HOPS),
        E.ExpectColumnValuesToBeBetween(column="n_answers", min_value=1),
        E.ExpectColumnValuesToBeInSet(column="answer_nonempty", value_set=[True]),
        E.ExpectColumnValuesToBeBetween(column="n_passages", min_value=1),
        E.ExpectColumnValuesToBeBetween(column="n_supporting", min_value=1),
        E.ExpectColumnValuesToBeInSet(column="supporting_resolved", value_set=[True]),
        E.ExpectColumnValuesToBeInSet(column="sent_idx_in_range", value_set=[True]),
        E.ExpectColumnValuesToBeInSet(column="passages_known", value_set=[True]),
        # leakage: no train question has the text of a held-out one (ids: unique above); against test
        # (official dev) questions, the decontaminate stage's gate checks every rule
        E.ExpectColumnValuesToBeInSet(column="train_text_of_heldout_question", value_set=[False]),
    ]
    passages_suite = [
        E.ExpectColumnValuesToBeUnique(column="pid"),
        E.ExpectColumnValuesToBeInSet(column="dataset_known", value_set=[True]),
        E.ExpectColumnValuesToBeBetween(column="text_len", min_value=1),
        E.ExpectColumnValuesToBeBetween(column="n_sentences", min_value=1),
    ]
    return {"questions": questions_suite, "passages": passages_suite}
