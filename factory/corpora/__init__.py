"""Corpus builders, one module per dataset, and the ingest of all configured sources.

``ingest_sources`` reads every configured file (and Hugging Face source), builds Question rows over
a shared ``PassagePool``, routes malformed records to quarantine (or fails, per
``ingest.on_bad_record``), assigns splits and returns the counts.
``read = ingested + quarantined + capped`` per dataset.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pyarrow as pa

from factory.config import Params
from factory.corpora import hotpotqa, musique, twowiki
from factory.corpora.base import read_json_records
from factory.corpora.pool import PassagePool
from factory.corpora.table import question_batches
from factory.errors import BadRecord, FactoryError
from factory.splits import assign_splits

BUILDERS: dict[str, Callable[..., dict]] = {
    hotpotqa.DATASET: hotpotqa.build,
    twowiki.DATASET: twowiki.build,
    musique.DATASET: musique.build,
}
# The official formats as msgspec types: a file whose records all fit decodes typed (fast path).
RECORD_TYPES: dict[str, type] = {hotpotqa.DATASET: hotpotqa.Record, twowiki.DATASET: twowiki.Record}


@dataclass
class IngestResult:
    rows: list[dict] = field(default_factory=list)  # Question rows; ``passages`` are entries of ``pool``
    pool: PassagePool = field(default_factory=PassagePool)
    passage_table: pa.Table | None = None
    quarantine: list[dict] = field(default_factory=list)
    counts: dict = field(default_factory=dict)

    def question_batches(self) -> Iterator[pa.Table]:
        """The Question table in parquet row-group batches (see ``factory.corpora.table``)."""
        return question_batches(self.rows, self.pool)

    @cached_property
    def questions(self) -> list[dict]:
        """Question rows as the contract has them (as read back from questions.parquet), for
        notebooks and tests; the stage streams ``question_batches`` instead."""
        return [row for batch in self.question_batches() for row in batch.to_pylist()]

    @cached_property
    def passages(self) -> list[dict]:
        return self.passage_table.to_pylist()


def _sources(params: Params) -> Iterable[tuple[str, str, Iterable[tuple[str, object]]]]:
    for dataset, files in params.corpora.items():  # keys are checked when params load (config.Dataset)
        for f in files:
            yield dataset, str(f), read_json_records(f, RECORD_TYPES.get(dataset))
    for src in params.ingest.hf:
        from factory.corpora.hf import read_hf

        yield src.dataset, f"hf:{src.path}", read_hf(src.path, src.name, src.split, src.dataset)


def ingest_sources(params: Params, progress: Callable | None = None) -> IngestResult:
    result = IngestResult()
    seen_ids: set[str] = set()
    read: Counter = Counter()
    read_by_type: dict[str, Counter] = defaultdict(Counter)
    capped: Counter = Counter()
    cap = params.ingest.max_per_dataset
    kept: Counter = Counter()
    fail = params.ingest.on_bad_record == "fail"
    for dataset, source, records in _sources(params):
        build = BUILDERS[dataset]
        source_name = Path(source).name if not source.startswith("hf:") else source
        for where, record in records:
            read[dataset] += 1
            qtype = record.get("type") if isinstance(record, dict) else getattr(record, "type", None)
            if dataset == "musique" and isinstance(record, dict):
                qtype = str(record.get("id", "")).split("__", 1)[0] or None
            read_by_type[dataset][str(qtype)] += 1
            try:
                row = build(record, where, source_name, result.pool)
                if row["question_id"] in seen_ids:
                    raise BadRecord(
                        dataset,
                        row["source_id"],
                        "_id" if dataset != "musique" else "id",
                        "duplicate id (first occurrence kept)",
                        where,
                    )
            except BadRecord as bad:
                if fail:
                    raise FactoryError(
                        f"bad input record: {bad} (set ingest.on_bad_record=quarantine to skip such records)"
                    ) from None
                result.quarantine.append({**bad.as_dict(), "source": source, "qtype": str(qtype)})
                continue
            if cap is not None and kept[dataset] >= cap:
                capped[dataset] += 1
                continue
            seen_ids.add(row["question_id"])
            kept[dataset] += 1
            result.rows.append(row)
            if progress:
                progress(1)
    if not result.rows:
        raise FactoryError(
            "no question was ingested: check corpora.* in params.yaml and data/interim/quarantine.jsonl"
        )
    s = params.splits
    assign_splits(result.rows, s.seed, s.train, s.heldout, s.test)
    result.passage_table = result.pool.passages_table([row["passages"] for row in result.rows])
    result.counts = _counts(result, read, read_by_type, capped)
    return result


def _generic(reason: str) -> str:
    """'sentence index 13 is out of range for 'X' (10 sentences)' -> a countable reason kind."""
    return re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "_", reason)


def _counts(result: IngestResult, read: Counter, read_by_type: dict, capped: Counter) -> dict:
    per: dict = {}
    passages_per_dataset = Counter(result.passage_table.column("dataset").to_pylist())
    for dataset in read:
        qs = [q for q in result.rows if q["dataset"] == dataset]
        bad = [b for b in result.quarantine if b["dataset"] == dataset]
        by_type = {}
        for qtype, n in sorted(read_by_type[dataset].items()):
            by_type[qtype] = {
                "read": n,
                "ingested": sum(1 for q in qs if q["qtype"] == qtype),
                "quarantined": sum(1 for b in bad if b["qtype"] == qtype),
            }
            by_type[qtype]["capped"] = n - by_type[qtype]["ingested"] - by_type[qtype]["quarantined"]
        per[dataset] = {
            "read": read[dataset],
            "ingested": len(qs),
            "quarantined": len(bad),
            "capped": capped[dataset],
            "passages": passages_per_dataset[dataset],
            "by_type": by_type,
            "by_split": dict(sorted(Counter(q["split"] for q in qs).items())),
            "by_route": dict(sorted(Counter(q["route"] for q in qs).items())),
            "quarantine_reasons": dict(
                sorted(Counter(f"{b['field']}: {_generic(b['reason'])}" for b in bad).items())
            ),
        }
    total = {
        k: sum(v[k] for v in per.values()) for k in ("read", "ingested", "quarantined", "capped", "passages")
    }
    return {"datasets": per, "total": total}
