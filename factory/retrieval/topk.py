"""Exact top-k of one dataset's BM25 index without a score for every passage.

First the threshold algorithm over the impact-ordered lists (each token's documents, best score
first): a round takes the next best documents of every query token and scores the new ones exactly;
a document not taken scores at most the sum of the lists' next values, so once that bound is below
the k-th best score taken, the top k is complete. Otherwise that k-th score is a threshold for
MaxScore: the tokens whose lists' maxima sum below it cannot lift a document on their own, so only
the other tokens' lists are read through, and the first ones are looked up for the documents those
lists name. Scores are exact (``DatasetIndex.scores_of``: float32, query-token order), so the result
is what scoring every passage gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def top(index, ids: Sequence[int], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every document that can be among the top ``k`` (all those tied with the k-th included),
    with its exact score, reading as little of the lists as it can.

    First the threshold algorithm over the impact-ordered lists: a round takes the next best
    documents of every query token (8, then 32) and scores the new ones exactly; a document not
    taken scores at most the sum of the lists' next values (each token times its repeats), so
    when that bound falls below the k-th best score taken, the top ``k`` is complete. Otherwise
    that k-th score is a threshold for MaxScore: the tokens whose whole lists' maxima sum below
    it cannot lift a document on their own, so only the other tokens' lists are read through,
    and the first ones are looked up for the documents those lists name."""
    unique, repeats = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
    starts = np.asarray(index.indptr[unique], dtype=np.int64)
    ends = np.asarray(index.indptr[unique + 1], dtype=np.int64)
    taken = starts.copy()
    docs = np.empty(0, dtype=np.int64)
    scores = np.empty(0, dtype=np.float32)
    theta = 0.0
    for block in (8, 32):
        fresh = [index.impact_indices[a : min(a + block, b)] for a, b in zip(taken.tolist(), ends.tolist())]
        taken = np.minimum(taken + block, ends)
        new = _distinct(np.concatenate(fresh)).astype(np.int64)
        if len(docs):
            new = new[~np.isin(new, docs, assume_unique=True)]
        docs = np.concatenate([docs, new])
        scores = np.concatenate([scores, index.scores_of(ids, new)])
        left = taken < ends
        if not left.any():
            return docs, scores
        if len(docs) >= k:
            theta = float(np.partition(scores, len(docs) - k)[len(docs) - k])
            bound = float(
                np.sum(repeats[left] * np.asarray(index.impact_data[taken[left]], dtype=np.float64))
            )
            if bound * (1 + 1e-4) < theta:  # margin: float32 rounding of the summed scores
                return docs, scores
    maxima = repeats * np.asarray(index.impact_data[starts], dtype=np.float64)
    by_max = np.argsort(maxima, kind="stable")
    minor = np.zeros(len(unique), dtype=bool)
    minor[by_max] = np.cumsum(maxima[by_max]) * (1 + 1e-4) < theta
    major = {int(t) for t in unique[~minor]}
    docs = _distinct(np.concatenate([index.indices[a:b] for a, b, m in zip(starts, ends, minor) if not m]))
    return docs, _scores_read_through(index, ids, docs, major)


def _scores_read_through(index, ids: Sequence[int], docs: np.ndarray, major: set[int]) -> np.ndarray:
    """``scores_of(ids, docs)`` where every list of a ``major`` token lies within ``docs``: those
    lists are added whole into a scratch row of the dataset, the others looked up; in query order."""
    scratch = index.scratch()
    try:
        for token in ids:
            idx, val = index.postings(token)
            if token in major:
                scratch[idx] += val
            elif len(idx):
                at = np.minimum(np.searchsorted(idx, docs), len(idx) - 1)
                hit = idx[at] == docs
                scratch[docs[hit]] += val[at[hit]]
        return scratch[docs]
    finally:
        scratch[docs] = 0.0


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (``np.unique`` without its hashing, which costs more on short arrays)."""
    values = np.sort(values)
    if len(values) > 1:
        values = values[np.concatenate(([True], values[1:] != values[:-1]))]
    return values
