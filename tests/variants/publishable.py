"""What `factory publish` reads besides the sets, as a run that ingested and decontaminated them leaves
it: every example's question an official train question of the train split, no flagged question, and
the evaluation sets (``eval_questions``: eval rows; none by default). For tests that write supervision
sets by hand."""

from __future__ import annotations

from pathlib import Path

from factory.utils import paths
from factory.utils.io import write_json
from schemas import iter_rows, write_parquet

CORPUS_FILE = "corpora/hotpotqa/train.json"


def make_publishable(
    eval_questions: list[dict] | None = None, flagged: list[dict] | None = None, questions: bool = True
) -> None:
    """Questions (unless ``questions`` is False: the test wrote its own), metrics and decontamination
    outputs for every example under data/supervision."""
    examples = {}
    for path in sorted(Path("data/supervision").rglob("train.parquet")):
        for e in iter_rows(path, ["question_id", "dataset", "question_norm"]):
            examples.setdefault(e["question_id"], e)
    if questions:
        write_parquet([_question(e) for e in examples.values()], paths.QUESTIONS, "question")
    write_parquet(eval_questions or [], paths.EVAL_QUESTIONS, "eval_question")
    paths.CONTAMINATION.write_text("".join(_line(row) for row in flagged or []))
    datasets = sorted({e["dataset"] for e in examples.values()})
    write_json(
        paths.METRICS / "ingest.json",
        {
            "sources": {
                CORPUS_FILE: {
                    "dataset": "hotpotqa",
                    "official_split": "train",
                    "read": len(examples),
                    "ingested": len(examples),
                    "sha256": "0" * 64,
                }
            },
            "datasets": {
                d: {"test_only": False, "by_split": {"train": 1, "heldout": 0, "test": 0}} for d in datasets
            },
        },
    )
    write_json(
        paths.METRICS / "decontamination.json",
        {
            "eval_sets": [],
            "rules": {"applied": ["exact"], "params": {"rules": ["exact"]}},
            "datasets": {},
            "total": {"checked": 0, "clean": 0, "contaminated": 0, "by_rule": {}, "eval_questions": 0},
        },
    )


def _question(example: dict) -> dict:
    source_id = example["question_id"].split("/", 1)[1]
    return {
        "question_id": example["question_id"],
        "dataset": example["dataset"],
        "source_id": source_id,
        "split": "train",
        "official_split": "train",
        "question": example["question_norm"] + "?",
        "question_norm": example["question_norm"],
        "answers": ["a"],
        "qtype": "bridge",
        "level": None,
        "route": "chain",
        "hops": 2,
        "passages": [{"pid": "p", "title": "T", "sentences": ["s"]}],
        "supporting": [{"title": "T", "sent_idx": 0, "pid": "p"}],
        "evidences": None,
        "decomposition": None,
        "source_file": Path(CORPUS_FILE).name,
    }


def _line(row: dict) -> str:
    import json

    return json.dumps(row, sort_keys=True) + "\n"
