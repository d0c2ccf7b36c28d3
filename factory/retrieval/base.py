"""What every retriever returns and offers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Hit:
    pid: str
    score: float


class Retriever(Protocol):
    def search(self, query: str, dataset: str, top_n: int, pool: list[str] | None = None) -> list[Hit]:
        """Top passages for the query; ``pool`` restricts the search to those pids."""
        ...


def rank_positions(store, dataset: str, positions: np.ndarray, scores: np.ndarray, top_n: int) -> list[Hit]:
    """The top ``top_n`` of documents at ``positions`` of ``dataset`` in ``store`` by score, ties broken
    by pid (only the documents that can make the cut are named)."""
    if len(positions) > top_n:
        kth = np.partition(scores, len(positions) - top_n)[len(positions) - top_n]
        keep = scores >= kth
        positions, scores = positions[keep], scores[keep]
    ranked = sorted(
        (-float(s), store.pid(dataset, d), float(s)) for d, s in zip(positions.tolist(), scores.tolist())
    )[:top_n]
    return [Hit(pid, score) for _, pid, score in ranked]
