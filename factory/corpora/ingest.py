"""The ingest of every configured source: records -> Question rows, a row group at a time.

``Ingest`` first tells the official split of every configured source (``factory.corpora.official``:
a source whose split cannot be told stops the run before anything is read), then reads every file
(and Hugging Face source) record by record, builds Question rows, routes malformed records to
quarantine (or fails, per ``ingest.on_bad_record``), assigns splits (official train: train or
held-out by a hash of the question's text; official dev: test, ``factory.utils.splits``) and yields
them a row group at a time with the passages they are the first to reference, so that the stage
writes as it reads. ``ingest_sources`` collects the same into memory. ``read = ingested + quarantined
+ capped`` per dataset. What differs between datasets (the builder, the typed record, the id field,
the question type) is asked of each one's ``Corpus`` (``factory.corpora.corpus``).
"""

from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pyarrow as pa

from factory.corpora import corpus
from factory.corpora.corpus import Corpus
from factory.corpora.files import Unreadable, empty_reason, read_json_records
from factory.corpora.official import hf_label, official_splits
from factory.corpora.pool import PassagePool
from factory.corpora.table import questions_table
from factory.params.config import Params
from factory.utils.errors import BadRecord, FactoryError
from factory.utils.io import file_sha256
from factory.utils.splits import OFFICIAL_SPLITS, SPLITS, assign_splits
from schemas import ROW_GROUP_SIZE

log = logging.getLogger(__name__)


def _sources(params: Params) -> Iterable[tuple[Corpus, str, Iterable[tuple[str, object]]]]:
    """(corpus, source, its (location, record) pairs) of every configured file and Hugging Face source
    (a name the registry lacks stops here, at ``corpus``, naming its key, if the CLI's check of the
    params, ``factory.names``, has not stopped it before)."""
    for dataset, files in params.corpora.items():
        c = corpus(dataset, f"corpora.{dataset}")
        for f in files:
            yield c, str(f), read_json_records(f, c.record_type)
    for i, src in enumerate(params.ingest.hf):
        from factory.corpora.hf import read_hf

        c = corpus(src.dataset, f"ingest.hf[{i}].dataset")
        yield c, hf_label(src.path, src.split), read_hf(src.path, src.name, src.split, c)


@dataclass
class Chunk:
    """What ingest yields for every ``ROW_GROUP_SIZE`` questions kept (the last chunk may be smaller):
    their rows, whose ``passages`` are entries of the chunk's own ``pool``; the passages they are the
    first to reference; the bad records met while reading them."""

    rows: list[dict]
    pool: PassagePool
    passages: pa.Table
    quarantine: list[dict]

    def questions_table(self) -> pa.Table:
        """The rows as the Question contract's table (one parquet row group)."""
        return questions_table(self.rows, self.pool)


class Ingest:
    """One ingest run over every configured source, streamed: ``chunks()`` reads the records, builds
    rows and yields a ``Chunk`` per row group of kept questions; memory follows a chunk (and the ids
    and pids seen, kept to find duplicates), not the corpus. ``counts`` is complete once the chunks
    are exhausted."""

    def __init__(self, params: Params, progress: Callable | None = None):
        self.params, self.progress = params, progress
        self.counts: dict = {}

    def chunks(self) -> Iterator[Chunk]:
        params, progress = self.params, self.progress
        official = official_splits(params)  # a source whose split cannot be told: refused before any read
        tally = _Tally()
        seen_ids: set[str] = set()
        emitted: set[str] = set()  # pids already in the passages table
        cap = params.ingest.max_per_dataset
        fail = params.ingest.on_bad_record == "fail"
        s = params.splits
        pool, rows, quarantine = PassagePool(), [], []

        def chunk() -> Chunk:
            assign_splits(rows, s.seed, s.heldout)
            passages = pool.passages_table([row["passages"] for row in rows])
            fresh = [pid not in emitted for pid in passages.column("pid").to_pylist()]
            passages = passages.filter(pa.array(fresh, pa.bool_()))
            pids = passages.column("pid").to_pylist()
            emitted.update(pids)
            tally.passages.update(passages.column("dataset").to_pylist())
            for row in rows:
                tally.kept(row)
            return Chunk(rows, pool, passages, quarantine)

        for c, source, records in _sources(params):
            dataset, build = c.name, c.build
            source_name = Path(source).name if not source.startswith("hf:") else source
            before = tally.read[dataset]
            tally.source(c.name, source, official[source])
            for where, record in records:
                tally.read[dataset] += 1
                qtype = c.question_type(record)
                tally.read_by_type[dataset][str(qtype)] += 1
                try:
                    if isinstance(record, Unreadable):  # bytes that decode to no record
                        raise BadRecord(dataset, record.record_id, record.field, record.reason, where)
                    row = build(record, where, source_name, pool)
                    if row["question_id"] in seen_ids:
                        duplicate = "duplicate id (first occurrence kept)"
                        raise BadRecord(dataset, row["source_id"], c.id_field, duplicate, where)
                except BadRecord as bad:
                    if fail:
                        raise FactoryError(
                            f"bad input record: {bad} (set ingest.on_bad_record=quarantine to skip such "
                            "records)"
                        ) from None
                    entry = {**bad.as_dict(), "source": source, "qtype": str(qtype)}
                    quarantine.append(entry)
                    tally.bad(entry)
                    continue
                if cap is not None and tally.kept_by_official[dataset, official[source]] >= cap:
                    tally.capped[dataset] += 1
                    continue
                seen_ids.add(row["question_id"])
                row["official_split"] = official[source]
                tally.kept_by_dataset[dataset] += 1
                tally.kept_by_official[dataset, official[source]] += 1
                tally.sources[source]["ingested"] += 1
                rows.append(row)
                if progress:
                    progress(1)
                if len(rows) == ROW_GROUP_SIZE:
                    yield chunk()
                    pool, rows, quarantine = PassagePool(), [], []
            tally.read_whole(source, tally.read[dataset] - before)
            if tally.read[dataset] == before:
                tally.empty_file(dataset, source)
        if rows or quarantine:
            yield chunk()
        _check_every_dataset_read(params, tally)
        _say_test_only(tally)
        if not seen_ids:
            raise FactoryError(
                "no question was ingested: check corpora.* in params.yaml and data/interim/quarantine.jsonl"
            )
        self.counts = tally.counts()


@dataclass
class IngestResult:
    """A whole ingest in memory (notebooks, tests, benchmarks); the stage streams ``Ingest`` instead."""

    question_table: pa.Table
    passage_table: pa.Table
    quarantine: list[dict] = field(default_factory=list)
    counts: dict = field(default_factory=dict)

    @cached_property
    def questions(self) -> list[dict]:
        """Question rows as the contract has them (as read back from questions.parquet)."""
        return self.question_table.to_pylist()

    @cached_property
    def passages(self) -> list[dict]:
        return self.passage_table.to_pylist()


def ingest_sources(params: Params, progress: Callable | None = None) -> IngestResult:
    """Every configured source ingested into memory (``Ingest`` collected)."""
    run = Ingest(params, progress)
    questions, passages, quarantine = [], [], []
    for chunk in run.chunks():
        questions.append(chunk.questions_table())
        passages.append(chunk.passages)
        quarantine += chunk.quarantine
    return IngestResult(pa.concat_tables(questions), pa.concat_tables(passages), quarantine, run.counts)


def _check_every_dataset_read(params: Params, tally: _Tally) -> None:
    """A configured dataset whose every file is empty would drop out of the run unnoticed: an error."""
    configured = dict.fromkeys([*params.corpora, *(src.dataset for src in params.ingest.hf)])
    lost = [dataset for dataset in configured if not tally.read[dataset]]
    if lost:
        files = "; ".join(f"{source}: {why}" for d in lost for source, why in tally.empty_files[d].items())
        raise FactoryError(
            f"{', '.join(f'corpora.{d}' for d in lost)}: no file holds a record ({files}), so the dataset "
            "would drop out of the run. Restore the file, or remove the dataset from corpora in params.yaml"
        )


def _say_test_only(tally: _Tally) -> None:
    """A dataset given with dev files only gives test questions only: the run says so (log, metrics)."""
    for dataset in tally.read:
        if not tally.by_official[dataset]["train"] and tally.kept_by_dataset[dataset]:
            log.warning(
                "ingest: %s has no official train file: its %d questions are test questions only (no "
                "training or held-out question comes from it; add its official train file to corpora.%s "
                "to train on it)",
                dataset,
                tally.kept_by_dataset[dataset],
                dataset,
            )


def _generic(reason: str) -> str:
    """'sentence index 13 is out of range for 'X' (10 sentences)' -> a countable reason kind."""
    return re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "_", reason)


class _Tally:
    """The counts of an ingest run, a record at a time (``read = ingested + quarantined + capped``)."""

    def __init__(self) -> None:
        self.read: Counter = Counter()
        self.read_by_type: dict[str, Counter] = defaultdict(Counter)
        self.capped: Counter = Counter()
        self.kept_by_dataset: Counter = Counter()
        # (dataset, official split): what ingest.max_per_dataset caps
        self.kept_by_official: Counter = Counter()
        self.ingested_by_type: dict[str, Counter] = defaultdict(Counter)
        self.by_split: dict[str, Counter] = defaultdict(Counter)
        self.by_route: dict[str, Counter] = defaultdict(Counter)
        self.quarantined: Counter = Counter()
        self.quarantined_by_type: dict[str, Counter] = defaultdict(Counter)
        self.reasons: dict[str, Counter] = defaultdict(Counter)
        self.passages: Counter = Counter()
        self.empty_files: dict[str, dict[str, str]] = defaultdict(dict)  # dataset -> file -> why empty
        self.by_official: dict[str, Counter] = defaultdict(Counter)
        self.sources: dict[str, dict] = {}  # source -> its dataset, official split and counts

    def source(self, dataset: str, source: str, official_split: str) -> None:
        self.sources[source] = {
            "dataset": dataset,
            "official_split": official_split,
            "read": 0,
            "ingested": 0,
        }

    def read_whole(self, source: str, read: int) -> None:
        """A source read to its end: its record count and (a file) the sha256 of its bytes."""
        self.sources[source]["read"] = read
        self.sources[source]["sha256"] = None if source.startswith("hf:") else file_sha256(source)

    def empty_file(self, dataset: str, source: str) -> None:
        why = self.empty_files[dataset][source] = empty_reason(source)
        log.warning("ingest: %s corpus file %s is empty (%s): nothing read from it", dataset, source, why)

    def kept(self, row: dict) -> None:
        dataset = row["dataset"]
        self.ingested_by_type[dataset][row["qtype"]] += 1
        self.by_official[dataset][row["official_split"]] += 1
        self.by_split[dataset][row["split"]] += 1
        self.by_route[dataset][row["route"]] += 1

    def bad(self, entry: dict) -> None:
        dataset = entry["dataset"]
        self.quarantined[dataset] += 1
        self.quarantined_by_type[dataset][entry["qtype"]] += 1
        self.reasons[dataset][f"{entry['field']}: {_generic(entry['reason'])}"] += 1

    def counts(self) -> dict:
        per: dict = {}
        for dataset in self.read:
            by_type = {}
            for qtype, n in sorted(self.read_by_type[dataset].items()):
                by_type[qtype] = {
                    "read": n,
                    "ingested": self.ingested_by_type[dataset][qtype],
                    "quarantined": self.quarantined_by_type[dataset][qtype],
                }
                by_type[qtype]["capped"] = n - by_type[qtype]["ingested"] - by_type[qtype]["quarantined"]
            per[dataset] = {
                "read": self.read[dataset],
                "ingested": self.kept_by_dataset[dataset],
                "quarantined": self.quarantined[dataset],
                "capped": self.capped[dataset],
                "passages": self.passages[dataset],
                "by_type": by_type,
                "by_official_split": {s: self.by_official[dataset][s] for s in OFFICIAL_SPLITS},
                "by_split": {s: self.by_split[dataset][s] for s in SPLITS},
                "test_only": not self.by_official[dataset]["train"],
                "by_route": dict(sorted(self.by_route[dataset].items())),
                "quarantine_reasons": dict(sorted(self.reasons[dataset].items())),
            }
            if self.empty_files[dataset]:  # only then: the metrics of a run without one keep their bytes
                per[dataset]["empty_files"] = dict(sorted(self.empty_files[dataset].items()))
        keys = ("read", "ingested", "quarantined", "capped", "passages")
        total = {k: sum(v[k] for v in per.values()) for k in keys}
        return {"datasets": per, "total": total, "sources": self.sources}
