"""What every retriever returns and offers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Hit:
    pid: str
    score: float


class Retriever(Protocol):
    def search(self, query: str, dataset: str, top_n: int, pool: list[str] | None = None) -> list[Hit]:
        """Top passages for the query; ``pool`` restricts the search to those pids."""
        ...
