import json

from factory.retrieval.bm25 import BM25Retriever


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
    assert hits == bm25.search(
        "zzqxv", "hotpotqa", 2, [p["pid"] for p in q["passages"]]
    )  # ties broken by pid


def test_save_load_gives_identical_results(bm25, tmp_path, questions_by_id):
    bm25.save(tmp_path)
    loaded = BM25Retriever.load(tmp_path)
    q = questions_by_id["hotpotqa/5a8b57f25542995d1e6f1371"]
    assert loaded.search(q["question"], "hotpotqa", 5) == bm25.search(q["question"], "hotpotqa", 5)
    assert json.loads((tmp_path / "bm25" / "musique" / "params.index.json").read_text())["num_docs"] > 0
