import pytest

from factory.retrieval.evaluate import supporting_recall


def test_recall_metrics(bm25, ingested):
    qs = [q for q in ingested.questions if q["dataset"] == "2wikimultihopqa"][:50]
    r = supporting_recall(bm25, qs, [2, 10], "question")
    assert r["2wikimultihopqa"]["recall@10"] == pytest.approx(1.0)  # 10-paragraph pools
    assert 0 < r["2wikimultihopqa"]["recall@2"] < 1
    assert r["all"]["questions"] == 50
