"""Recall@N of gold supporting paragraphs, with the question itself as the query."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from factory.retrieval.base import Retriever
from factory.utils.splits import unit_hash

RECALL_COLUMNS = ["question_id", "dataset", "question", "passages.list.element.pid", "supporting"]


def recall_sample(questions_path: str | Path, per_dataset: int | None, seed: int) -> tuple[list[dict], dict]:
    """A seeded sample of ``per_dataset`` questions of each dataset (None: all), with what recall@N
    needs, in file order; and the number sampled per dataset. A question's place in the sample is a
    hash of (seed, id), so the sample does not depend on file order."""
    from schemas import read_rows

    ranked: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for q in read_rows(questions_path, columns=["question_id", "dataset"]):
        ranked[q["dataset"]].append((unit_hash("recall", seed, q["question_id"]), q["question_id"]))
    chosen = {
        qid for rows in ranked.values() for _, qid in (sorted(rows)[:per_dataset] if per_dataset else rows)
    }
    questions = read_rows(questions_path, columns=RECALL_COLUMNS, where={"question_id": chosen})
    counts: dict[str, int] = defaultdict(int)
    for q in questions:
        counts[q["dataset"]] += 1
    return questions, dict(sorted(counts.items()))


def supporting_recall(retriever: Retriever, questions: list[dict], cutoffs: list[int], scope: str) -> dict:
    """Per dataset and overall: mean over questions of |gold ∩ top-N| / |gold|."""
    top = max(cutoffs)
    sums: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, int] = defaultdict(int)
    for q in questions:
        gold = {s["pid"] for s in q["supporting"]}
        pool = [p["pid"] for p in q["passages"]] if scope == "question" else None
        ranked = [h.pid for h in retriever.search(q["question"], q["dataset"], top, pool)]
        for n in cutoffs:
            sums[q["dataset"]][n] += len(gold & set(ranked[:n])) / len(gold)
        counts[q["dataset"]] += 1
    out = {
        ds: {f"recall@{n}": sums[ds][n] / counts[ds] for n in cutoffs} | {"questions": counts[ds]}
        for ds in sorted(counts)
    }
    total = sum(counts.values())
    out["all"] = {f"recall@{n}": sum(sums[ds][n] for ds in counts) / total for n in cutoffs} | {
        "questions": total
    }
    return out
