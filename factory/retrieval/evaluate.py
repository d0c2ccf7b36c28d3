"""Recall@N of gold supporting paragraphs, with the question itself as the query."""

from __future__ import annotations

from collections import defaultdict

from factory.retrieval.base import Retriever


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
