"""Passage retrieval: BM25 (bm25s), dense (sentence-transformers) and a hybrid of both.

An index is built per dataset over all of its passages (``factory.retrieval.build``), next to the
passage store it searches (``factory.retrieval.store``). ``scope='question'`` restricts a search to
the question's own context pool (the distractor setting); ``scope='pooled'`` searches every passage
of the dataset. Scores are deterministic; ties are broken by pid.
"""

from __future__ import annotations

from factory.retrieval.base import Retriever


def load_retriever(index_dir, params) -> Retriever:
    """The retriever named by ``index.retriever`` over an index built by the index stage; its
    passages are ``retriever.store`` (memory-mapped, looked up by pid)."""
    from factory.retrieval.bm25 import BM25Retriever
    from factory.retrieval.store import PassageStore

    kind = params.index.retriever
    store = PassageStore.open(index_dir)
    bm25 = BM25Retriever.load(index_dir, store) if kind in ("bm25", "hybrid") else None
    if kind == "bm25":
        return bm25
    from factory.retrieval.dense import DenseRetriever

    dense = DenseRetriever.load(index_dir, store, params.index.dense_model)
    if kind == "dense":
        return dense
    from factory.retrieval.hybrid import HybridRetriever

    return HybridRetriever(bm25, dense, params.index.hybrid_alpha)
