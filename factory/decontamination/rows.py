"""The rows decontamination compares: evaluation rows and pool rows, from Question rows or from an
evaluation file in its dataset's official format.

An evaluation row is ``{"eval_set", "eval_id", "dataset", "question_norm", "answers", "titles"}``:
``eval_set`` labels the file (``"hotpotqa/dev_sample.json"``), ``eval_id`` is the record's id in that file.
A pool row is ``{"question_id", "source_id", "dataset", "question_norm", "answers", "titles"}``. ``answers``
hold the gold answer first, then its aliases; ``titles`` are the supporting titles (HotpotQA and
2WikiMultihopQA: the titles of the supporting facts; MuSiQue: the titles of the supporting paragraphs).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from factory.corpora import corpus
from factory.corpora.files import Unreadable, read_json_records
from factory.corpora.pool import PassagePool
from factory.utils.errors import BadRecord

# Records built per passage pool while reading an evaluation file: the pool keeps every paragraph it saw, and
# decontamination needs none of them, so a fresh pool every so often bounds memory by this, not by the file.
_RECORDS_PER_POOL = 1000


def titles_of(question_row: dict) -> list[str]:
    """The supporting titles of a Question row, in the order they are first named, each once."""
    return list(dict.fromkeys(fact["title"] for fact in question_row["supporting"]))


def eval_set_label(question_row: dict) -> str:
    """The evaluation-set label of a Question row's own file: ``<dataset>/<source file name>``."""
    return f"{question_row['dataset']}/{question_row['source_file']}"


def eval_row(question_row: dict, eval_set: str | None = None) -> dict:
    """The evaluation row of a Question row (``eval_set``: its file's label unless given)."""
    return {
        "eval_set": eval_set or eval_set_label(question_row),
        "eval_id": question_row["source_id"],
        "dataset": question_row["dataset"],
        "question_norm": question_row["question_norm"],
        "answers": list(question_row["answers"]),
        "titles": titles_of(question_row),
    }


def pool_row(question_row: dict) -> dict:
    """The pool row of a Question row."""
    return {
        "question_id": question_row["question_id"],
        "source_id": question_row["source_id"],
        "dataset": question_row["dataset"],
        "question_norm": question_row["question_norm"],
        "answers": list(question_row["answers"]),
        "titles": titles_of(question_row),
    }


@dataclass
class EvalFile:
    """The evaluation rows of one file and the records that could not be read (``BadRecord`` dicts, as the
    ingest quarantine writes them): a bad record is left out, not fatal, and the caller reports it."""

    rows: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)


def read_eval_file(dataset: str, path: str | Path, eval_set: str | None = None) -> EvalFile:
    """The evaluation rows of a file in ``dataset``'s official format (read and checked as ingest reads it);
    ``eval_set`` labels them (default ``<dataset>/<file name>``)."""
    label = eval_set or f"{dataset}/{Path(path).name}"
    out = EvalFile()
    for question_row in _question_rows(dataset, Path(path), out.skipped):
        out.rows.append(eval_row(question_row, label))
    return out


def _question_rows(dataset: str, path: Path, skipped: list[dict]) -> Iterator[dict]:
    c = corpus(dataset, "decontamination.eval_sets")
    pool = PassagePool()
    for n, (where, record) in enumerate(read_json_records(path, c.record_type)):
        if n % _RECORDS_PER_POOL == 0:
            pool = PassagePool()
        try:
            if isinstance(record, Unreadable):
                raise BadRecord(dataset, record.record_id, record.field, record.reason, where)
            yield c.build(record, where, path.name, pool)
        except BadRecord as bad:
            skipped.append({**bad.as_dict(), "source": str(path)})
