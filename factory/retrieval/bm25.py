"""BM25 over each dataset's passages with bm25s (sparse, fast, saved as .npy files)."""

from __future__ import annotations

import json
from pathlib import Path

import bm25s
import numpy as np

from factory.errors import FactoryError
from factory.retrieval.base import Hit


def tokenize(texts: list[str]) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)


def passage_text(p: dict) -> str:
    return f"{p['title']}. {p['text']}"


def rank(scores: np.ndarray, positions: np.ndarray, pids: list[str], top_n: int) -> list[Hit]:
    """Top-n of ``scores`` restricted to ``positions``; ties broken by pid for determinism."""
    sub = scores[positions]
    order = sorted(range(len(positions)), key=lambda i: (-float(sub[i]), pids[positions[i]]))[:top_n]
    return [Hit(pids[positions[i]], float(sub[i])) for i in order]


def pool_positions(position: dict[str, int], n: int, pool: list[str] | None) -> np.ndarray:
    """Index positions of a question's pool of pids (all ``n`` passages when there is no pool)."""
    if pool is None:
        return np.arange(n)
    return np.array([position[p] for p in pool if p in position], dtype=np.int64)


class BM25Retriever:
    def __init__(self, models: dict[str, bm25s.BM25], pids: dict[str, list[str]]):
        self.models, self.pids = models, pids
        self.position = {ds: {pid: i for i, pid in enumerate(p)} for ds, p in pids.items()}

    @staticmethod
    def build(passages: list[dict], k1: float = 1.5, b: float = 0.75) -> BM25Retriever:
        models, pids = {}, {}
        for dataset in sorted({p["dataset"] for p in passages}):
            rows = [p for p in passages if p["dataset"] == dataset]
            model = bm25s.BM25(k1=k1, b=b)
            model.index(
                bm25s.tokenize([passage_text(p) for p in rows], stopwords="en", show_progress=False),
                show_progress=False,
            )
            models[dataset], pids[dataset] = model, [p["pid"] for p in rows]
        return BM25Retriever(models, pids)

    def save(self, index_dir: str | Path) -> None:
        for dataset, model in self.models.items():
            folder = Path(index_dir) / "bm25" / dataset
            model.save(folder, show_progress=False)
            (folder / "pids.json").write_text(json.dumps(self.pids[dataset]))

    @staticmethod
    def load(index_dir: str | Path, passages: list[dict] | None = None) -> BM25Retriever:
        root = Path(index_dir) / "bm25"
        if not root.exists():
            raise FactoryError(
                f"no BM25 index under {root}: run `factory index` (or `dvc repro index`) first"
            )
        models, pids = {}, {}
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            models[folder.name] = bm25s.BM25.load(folder, load_vocab=True, show_progress=False)
            pids[folder.name] = json.loads((folder / "pids.json").read_text())
        return BM25Retriever(models, pids)

    def scores(self, query: str, dataset: str) -> np.ndarray:
        model = self.models.get(dataset)
        if model is None:
            raise FactoryError(f"the index has no dataset {dataset!r} (has {sorted(self.models)})")
        tokens = [t for t in tokenize([query])[0] if t in model.vocab_dict]
        if not tokens:
            return np.zeros(len(self.pids[dataset]), dtype=np.float32)
        return model.get_scores(tokens)

    def positions(self, dataset: str, pool: list[str] | None) -> np.ndarray:
        return pool_positions(self.position[dataset], len(self.pids[dataset]), pool)

    def search(self, query: str, dataset: str, top_n: int, pool: list[str] | None = None) -> list[Hit]:
        scores = self.scores(query, dataset)
        positions = self.positions(dataset, pool)
        if pool is None and len(positions) > 4 * top_n:
            # pre-select with argpartition so ranking stays O(n) on large datasets
            keep = np.argpartition(-scores, 4 * top_n)[: 4 * top_n]
            positions = np.sort(keep)
        return rank(scores, positions, self.pids[dataset], top_n)
