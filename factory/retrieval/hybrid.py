"""Hybrid retrieval: alpha * dense + (1 - alpha) * BM25, each min-max scaled over the candidates."""

from __future__ import annotations

import numpy as np

from factory.retrieval.base import Hit, rank_positions
from factory.retrieval.bm25 import BM25Retriever
from factory.retrieval.dense import DenseRetriever


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return np.zeros_like(x) if hi - lo < 1e-12 else (x - lo) / (hi - lo)


class HybridRetriever:
    def __init__(self, bm25: BM25Retriever, dense: DenseRetriever, alpha: float):
        self.bm25, self.dense, self.alpha = bm25, dense, alpha

    def search(self, query: str, dataset: str, top_n: int, pool: list[str] | None = None) -> list[Hit]:
        positions = self.bm25.positions(dataset, pool)  # the same store: the same positions for both
        sparse = self.bm25.scores(query, dataset, positions)
        dense = self.dense.scores(query, dataset, positions)
        mixed = self.alpha * _minmax(dense.astype(np.float64)) + (1 - self.alpha) * _minmax(
            sparse.astype(np.float64)
        )
        return rank_positions(self.bm25.store, dataset, positions, mixed, top_n)
