"""Exact top-k of one dataset's BM25 index without a score for every passage.

First the threshold algorithm over the impact-ordered lists (each token's documents, best score
first): a round takes the next best documents of every query token and scores the new ones exactly;
a document not taken scores at most the sum of the lists' next values, so once that bound is below
the k-th best score taken, the top k is complete. Otherwise that k-th score is a threshold for
MaxScore: the tokens whose lists' maxima sum below it cannot lift a document on their own, so only
the other ("essential") tokens' lists can hold the top k. The shortest essential list is scored
whole (those of its documents that can still reach the threshold: the other lists are searched
shortest first, and a document leaves once its bound falls below it), which raises the threshold
and often makes the long lists of common words non-essential (a query of one rare name and a few
common words reads the name's list, never the words'); what is still essential past
``WHOLE_LIST_MAX`` documents is read through, the other tokens looked up for the documents those
lists name. Scores are exact (``DatasetIndex.scores_of``: float32, query-token order), so the
result is what scoring every passage gives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# an essential list up to this long is scored document by document (a binary search per query token);
# a longer one costs less read through, its scores added into a row of the dataset
WHOLE_LIST_MAX = 16384
_MARGIN = 1 + 1e-4  # float32 rounding of summed scores: a bound must clear the threshold by this


def top(index, ids: Sequence[int], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Every document that can be among the top ``k`` (all those tied with the k-th included),
    with its exact score, reading as little of the lists as it can.

    First the threshold algorithm over the impact-ordered lists: a round takes the next best
    documents of every query token (8, then 32) and scores the new ones exactly; a document not
    taken scores at most the sum of the lists' next values (each token times its repeats), so
    when that bound falls below the k-th best score taken, the top ``k`` is complete. Otherwise
    MaxScore with that k-th score as the threshold: tokens whose whole lists' maxima sum below it
    cannot lift a document on their own; of the others (essential), the shortest list is scored
    whole (``_list_reaching``) while it is short, raising the threshold, until no essential list
    is left unscored or the shortest is long; those are then read through and the other tokens looked up."""
    unique, repeats = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
    starts = np.asarray(index.indptr[unique], dtype=np.int64)
    ends = np.asarray(index.indptr[unique + 1], dtype=np.int64)
    taken = starts.copy()
    docs = np.empty(0, dtype=index.indices.dtype)  # the lists' own dtype: a search never converts them
    scores = np.empty(0, dtype=np.float32)
    for block in (8, 32):
        fresh = [index.impact_indices[a : min(a + block, b)] for a, b in zip(taken.tolist(), ends.tolist())]
        taken = np.minimum(taken + block, ends)
        docs, scores = _add(index, ids, docs, scores, np.concatenate(fresh))
        left = taken < ends
        if not left.any():
            return docs, scores
        bound = float(np.sum(repeats[left] * np.asarray(index.impact_data[taken[left]], dtype=np.float64)))
        if len(docs) >= k and bound * _MARGIN < _kth(scores, k):
            return docs, scores
    maxima = repeats * np.asarray(index.impact_data[starts], dtype=np.float64)
    by_max = np.argsort(maxima, kind="stable")
    lengths = ends - starts
    whole = taken >= ends  # lists whose every document is scored
    while True:
        threshold = _kth(scores, k) if len(docs) >= k else 0.0  # 0: every document can reach it
        minor = np.zeros(len(unique), dtype=bool)
        if len(docs) >= k:
            minor[by_max] = np.cumsum(maxima[by_max]) * _MARGIN < threshold
        essential = ~minor & ~whole
        if not essential.any():
            return docs, scores
        shortest = int(np.flatnonzero(essential)[np.argmin(lengths[essential])])
        if lengths[shortest] > WHOLE_LIST_MAX:
            break
        fresh, fresh_scores = _list_reaching(
            index, ids, shortest, unique, repeats, starts, ends, maxima, docs, threshold
        )
        docs, scores = np.concatenate([docs, fresh]), np.concatenate([scores, fresh_scores])
        whole[shortest] = True  # every document of it that can reach the top k is scored
    major = {int(t) for t in unique[~minor]}
    listed = [index.indices[a:b] for a, b, m in zip(starts, ends, minor) if not m]
    docs = _distinct(np.concatenate(listed))
    return docs, _scores_read_through(index, ids, docs, major)


def _add(index, ids, docs: np.ndarray, scores: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``docs`` and ``scores`` with the documents of ``new`` not among them yet, exactly scored."""
    new = _distinct(new)
    if len(docs):
        new = new[~np.isin(new, docs, assume_unique=True)]
    return np.concatenate([docs, new]), np.concatenate([scores, index.scores_of(ids, new)])


def _list_reaching(
    index, ids, t: int, unique, repeats, starts, ends, maxima, docs: np.ndarray, threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """The documents of token ``t``'s list not in ``docs`` whose exact score can reach ``threshold``
    (the k-th best so far), with those scores (float32, summed in query-token order as ``scores_of``
    sums them).

    The list's own scores are read off it; the other tokens are looked up shortest list first, and
    after each a document whose score so far plus the maxima of the tokens still to look up falls
    below the threshold leaves the running: the long lists of common words are searched for the few
    documents left, not for the whole list (on a large corpus that list is long)."""
    a, b = int(starts[t]), int(ends[t])
    listed = np.asarray(index.indices[a:b])
    new = ~np.isin(listed, docs, assume_unique=True)
    cand = listed[new]
    values = {int(unique[t]): np.asarray(index.data[a:b])[new]}  # token -> its score of each candidate
    bound = values[int(unique[t])].astype(np.float64) * float(repeats[t])
    left = float(maxima.sum() - maxima[t])
    alive = np.flatnonzero((bound + left) * _MARGIN >= threshold)
    for j in np.argsort(ends - starts, kind="stable").tolist():
        if j == t:
            continue
        left -= float(maxima[j])
        here = np.zeros(len(cand), dtype=np.float32)
        c, d = int(starts[j]), int(ends[j])
        if d > c and len(alive):
            idx, wanted = index.indices[c:d], cand[alive]
            at = np.minimum(np.searchsorted(idx, wanted), d - c - 1)
            hit = idx[at] == wanted
            here[alive[hit]] = index.data[c:d][at[hit]]
            bound[alive] += here[alive] * float(repeats[j])
            alive = alive[(bound[alive] + left) * _MARGIN >= threshold]
        values[int(unique[j])] = here
    scores = np.zeros(len(alive), dtype=np.float32)
    for token in ids:  # query order, repeats included
        scores += values[int(token)][alive]
    return cand[alive], scores


def _kth(scores: np.ndarray, k: int) -> float:
    """The k-th best of ``scores`` (at least k of them)."""
    return float(np.partition(scores, len(scores) - k)[len(scores) - k])


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
