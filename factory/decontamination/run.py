"""One decontamination run: the evaluation sets indexed, the training pool streamed through the index.

Memory follows the evaluation side (about 22k questions at full size) and one batch of the pool,
never the pool. Every pool question leaves with a status, clean or contaminated by one rule, and the
counts add up per dataset (``checked = clean + contaminated``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

from factory.decontamination.eval_sets import EvalSet, eval_sets, file_rows
from factory.decontamination.index import EvalIndex
from factory.params.config import Params
from factory.utils.io import atomic_path, file_sha256, jsonl_line, naming, progress
from schemas import ROW_GROUP_SIZE, ParquetStream, iter_batches

POOL_SPLITS = ["train", "heldout"]
POOL_COLUMNS = [
    "question_id",
    "source_id",
    "dataset",
    "question_norm",
    "answers",
    "supporting.list.element.title",
]


def decontaminate(params: Params, questions: Path, flagged_path: Path, eval_path: Path) -> dict:
    """Check the pool of ``questions`` (parquet) against every evaluation set; write the flagged rows
    to ``flagged_path`` (JSONL) and the evaluation questions to ``eval_path`` (parquet); return the
    metrics."""
    sets = eval_sets(params)
    with ParquetStream(eval_path, "eval_question") as out:
        rows = [row for s in sets for row in file_rows(s)]
        out.write_rows(rows)
    index = EvalIndex(rows, params.decontamination)
    del rows
    tally = _Tally()
    total = sum(num_rows_where(questions, s) for s in POOL_SPLITS)
    with (
        progress(total=total, desc="decontaminate", unit="q") as bar,
        atomic_path(flagged_path) as tmp,
        naming(flagged_path),
        open(tmp, "w", encoding="utf-8") as fh,
    ):
        for batch in _pool(questions):
            for q, match in zip(batch, index.match(batch), strict=True):
                tally.add(q["dataset"], match)
                if match is not None:
                    fh.write(jsonl_line(_flagged(q, match)))
            bar.update(len(batch))
    return _metrics(params, sets, tally)


def num_rows_where(path: Path, split: str) -> int:
    return sum(b.num_rows for b in iter_batches(path, ["question_id"], {"split": [split]}))


def _pool(questions: Path) -> Iterator[list[dict]]:
    """The training pool (train and held-out questions) in batches, as the index reads them."""
    for batch in iter_batches(questions, POOL_COLUMNS, {"split": POOL_SPLITS}, batch_rows=ROW_GROUP_SIZE):
        rows = batch.to_pylist()
        for q in rows:
            q["titles"] = [s["title"] for s in q.pop("supporting")]
        yield rows


def _flagged(q: dict, match) -> dict:
    return {
        "question_id": q["question_id"],
        "source_id": q["source_id"],
        "dataset": q["dataset"],
        "eval_set": match.eval_set,
        "eval_id": match.eval_id,
        "rule": match.rule,
        "score": round(float(match.score), 6),
    }


class _Tally:
    """Per dataset: checked, clean, contaminated by rule and by evaluation set x rule."""

    def __init__(self) -> None:
        self.checked: Counter = Counter()
        self.by_rule: dict[str, Counter] = defaultdict(Counter)
        self.by_set: dict[str, dict[str, Counter]] = defaultdict(lambda: defaultdict(Counter))

    def add(self, dataset: str, match) -> None:
        self.checked[dataset] += 1
        if match is not None:
            self.by_rule[dataset][match.rule] += 1
            self.by_set[dataset][match.eval_set][match.rule] += 1


def _metrics(params: Params, sets: list[EvalSet], tally: _Tally) -> dict:
    rules = list(params.decontamination.rules)
    datasets = {}
    for dataset in sorted(tally.checked):
        contaminated = sum(tally.by_rule[dataset].values())
        datasets[dataset] = {
            "checked": tally.checked[dataset],
            "clean": tally.checked[dataset] - contaminated,
            "contaminated": contaminated,
            "by_rule": {rule: tally.by_rule[dataset][rule] for rule in rules},
            "by_eval_set": {  # every evaluation set, a zero count included: what it was checked against
                s.label: {rule: tally.by_set[dataset][s.label][rule] for rule in rules} for s in sets
            },
        }
    keys = ("checked", "clean", "contaminated")
    total = {k: sum(d[k] for d in datasets.values()) for k in keys}
    total["by_rule"] = {rule: sum(d["by_rule"][rule] for d in datasets.values()) for rule in rules}
    total["eval_questions"] = sum(s.questions for s in sets)
    return {
        "eval_sets": [
            {
                "eval_set": s.label,
                "dataset": s.dataset,
                "file": s.file,
                "origin": s.origin,
                "sha256": file_sha256(s.file),
                "questions": s.questions,
                "text_only": s.text_only,
                "unreadable": s.unreadable,
            }
            for s in sets
        ],
        "rules": {"applied": rules, "params": params.digest("decontamination")["decontamination"]},
        "datasets": datasets,
        "total": total,
    }
