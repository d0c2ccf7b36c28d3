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
    by pid (through the pids' ranks: only the winners' pids are read)."""
    positions = np.asarray(positions, dtype=np.int64)
    if len(positions) > top_n:
        kth = np.partition(scores, len(positions) - top_n)[len(positions) - top_n]
        keep = scores >= kth
        positions, scores = positions[keep], scores[keep]
    order = np.lexsort((store.ranks[dataset][positions], -np.asarray(scores)))[:top_n]
    return [Hit(store.pid(dataset, int(positions[i])), float(scores[i])) for i in order.tolist()]
