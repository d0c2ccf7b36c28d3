"""The evaluation sets a training pool is checked against, as rows the index reads.

Two kinds: the run's own official dev files and the files of ``decontamination.eval_sets``, so that a
run that trains on HotpotQA and MuSiQue still protects 2WikiMultihopQA's dev set. Both are read here
with their dataset's own builder (``factory.corpora``). A record the builder refuses (ingest
quarantines it) is still an evaluation question: when it has a question text it is checked by text
alone (``text_only``: no supporting titles for the same-chain rule); one without a question text
cannot be checked and is counted (``unreadable``) and logged. None is silently dropped, and none
costs the other records.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from factory.corpora import corpus
from factory.corpora.corpus import field_of
from factory.corpora.files import Unreadable, check_file, read_json_records
from factory.corpora.official import official_splits
from factory.corpora.pool import PassagePool
from factory.decontamination.rows import titles_of
from factory.params.config import Params
from factory.utils.errors import BadRecord, FactoryError
from factory.utils.text import normalize_question

log = logging.getLogger(__name__)
POOL_RECORDS = 1000  # records per passage pool: the builder's pool is only needed while a row is built


@dataclass
class EvalSet:
    """One evaluation file: its label in rows and metrics, where it comes from, what was read."""

    label: str  # "<dataset>/<file name>"
    dataset: str
    file: str
    origin: str  # "corpora" (an official dev file of the run) or "decontamination.eval_sets"
    questions: int = 0
    text_only: int = 0
    unreadable: int = 0


def label_of(dataset: str, file: str) -> str:
    return f"{dataset}/{Path(file).name}"


def eval_sets(params: Params) -> list[EvalSet]:
    """Every evaluation file of the run: its official dev files, then ``decontamination.eval_sets``
    (a file the corpora already read as dev is listed once; one they read as train is refused)."""
    official = official_splits(params)
    sets = [
        EvalSet(label_of(dataset, f), dataset, f, "corpora")
        for dataset, files in params.corpora.items()
        for f in files
        if official[str(f)] == "dev"
    ]
    known = {Path(s.file).resolve() for s in sets}
    train = {
        Path(f).resolve(): (d, f) for d, fs in params.corpora.items() for f in fs if official[f] == "train"
    }
    for dataset, files in params.decontamination.eval_sets.items():
        for f in files:
            resolved = Path(f).resolve()
            if resolved in train:
                raise FactoryError(
                    f"decontamination.eval_sets.{dataset} lists {f}, which "
                    f"corpora.{train[resolved][0]} reads "
                    "as official train: an evaluation set cannot be a training file. Remove it from one of "
                    "the two"
                )
            if resolved not in known:
                check_file(Path(f))
                known.add(resolved)
                sets.append(EvalSet(label_of(dataset, f), dataset, str(f), "decontamination.eval_sets"))
    return sets


def file_rows(eval_set: EvalSet) -> Iterator[dict]:
    """The eval rows of an evaluation file, read with its dataset's builder; counts ``questions``,
    ``text_only`` and ``unreadable`` on ``eval_set``."""
    c = corpus(eval_set.dataset, f"decontamination.eval_sets.{eval_set.dataset}")
    name = Path(eval_set.file).name
    pool = PassagePool()
    for i, (where, record) in enumerate(read_json_records(eval_set.file, c.record_type)):
        if i % POOL_RECORDS == 0:
            pool = PassagePool()
        try:
            if isinstance(record, Unreadable):
                raise BadRecord(c.name, record.record_id, record.field, record.reason, where)
            row = c.build(record, where, name, pool)
            titles = titles_of(row)
        except BadRecord as bad:
            row, titles = _text_of(record, c.id_field, bad.record_id), []
            if row is None:
                eval_set.unreadable += 1
                log.warning(
                    "decontaminate: %s: a record without a question text cannot be checked: %s", name, bad
                )
                continue
            eval_set.text_only += 1
        eval_set.questions += 1
        yield {
            "eval_set": eval_set.label,
            "dataset": c.name,
            "eval_id": row["source_id"],
            "question": row["question"],
            "question_norm": normalize_question(row["question"]),
            "answers": row["answers"],
            "titles": titles,
        }


def _text_of(record: object, id_field: str, record_id: str) -> dict | None:
    """What a refused record still says: its id, question and answers (None: no question text)."""
    question = field_of(record, "question")
    if not isinstance(question, str) or not question.strip():
        return None
    answers = [field_of(record, "answer"), *(field_of(record, "answer_aliases") or [])]
    source_id = field_of(record, id_field)
    return {
        "source_id": str(source_id if source_id is not None else record_id),
        "question": question,
        "answers": [a for a in answers if isinstance(a, str) and a.strip()],
    }
