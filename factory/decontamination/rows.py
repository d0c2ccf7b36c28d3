"""The rows decontamination compares: evaluation rows and pool rows, from Question rows or from an
evaluation file in its dataset's official format.

An evaluation row is ``{"eval_set", "eval_id", "dataset", "question_norm", "answers", "titles"}``:
``eval_set`` labels the file (``"hotpotqa/dev_sample.json"``), ``eval_id`` is the record's id in that file.
A pool row is ``{"question_id", "source_id", "dataset", "question_norm", "answers", "titles"}``. ``answers``
hold the gold answer first, then its aliases; ``titles`` are the supporting titles (HotpotQA and
2WikiMultihopQA: the titles of the supporting facts; MuSiQue: the titles of the supporting paragraphs).
"""

from __future__ import annotations


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
