"""The index and its top-k against bm25s scoring every passage: the same scores, passages and order."""

from __future__ import annotations

import random

import bm25s
import numpy as np
import pytest

from factory.retrieval.bm25 import BM25Retriever, tokenize
from factory.retrieval.store import PassageStore

RELATIONS = ("nationality", "born", "director", "located in", "population", "spouse", "founded")


@pytest.fixture(scope="module")
def saved(bm25, tmp_path_factory):
    folder = tmp_path_factory.mktemp("index")
    bm25.save(folder)
    return folder


def _queries(ingested, n: int = 150) -> list[tuple[str, str, list[str]]]:
    """Questions and entity-relation lookups as the agent sends them (with each question's pool)."""
    rng = random.Random(0)
    questions = rng.sample(ingested.questions, n)
    out = []
    for q in questions:
        pool = [p["pid"] for p in q["passages"]]
        out.append((q["question"], q["dataset"], pool))
        for p in q["passages"][:2]:
            out.append((f"{p['title']} {rng.choice(RELATIONS)}", q["dataset"], pool))
    out.append(("zzqxv qqzzv", "hotpotqa", out[0][2]))  # no known token: every passage scores 0
    return out


def _reference(model: bm25s.BM25, pids: list[str], query: str, pool: list[str] | None, k: int):
    """Score every passage with bm25s, restrict to the pool (each pid once), rank by (-score, pid)."""
    tokens = [t for t in tokenize(query) if t in model.vocab_dict]
    scores = model.get_scores(tokens) if tokens else np.zeros(len(pids), dtype=np.float32)
    allowed = set(pool) if pool is not None else None
    ranked = sorted(
        (-float(s), pid) for pid, s in zip(pids, scores.tolist()) if allowed is None or pid in allowed
    )
    return [(pid, -s) for s, pid in ranked[:k]]


@pytest.mark.parametrize("k", [2, 5])
def test_search_returns_what_scoring_every_passage_returns(saved, ingested, k):
    retriever = BM25Retriever.load(saved)
    store = PassageStore.open(saved)
    references = {}
    for dataset in store.datasets:
        # bm25s itself reads the index the factory wrote (memory-mapped), and scores every passage
        model = bm25s.BM25.load(saved / "bm25" / dataset, load_vocab=True, mmap=True)
        pids = [store.pid(dataset, i) for i in range(store.size(dataset))]
        references[dataset] = (model, pids)
    for query, dataset, pool in _queries(ingested):
        model, pids = references[dataset]
        for scope_pool in (pool, None):
            got = [(h.pid, h.score) for h in retriever.search(query, dataset, k, scope_pool)]
            assert got == _reference(model, pids, query, scope_pool, k), (query, dataset, scope_pool is None)


def test_scores_are_bm25s_own(ingested):
    """The streamed builder gives the scores bm25s's own ``index`` gives, bit for bit."""
    rows = [p for p in ingested.passages if p["dataset"] == "musique"]
    texts = [f"{p['title']}. {p['text']}" for p in rows]
    model = bm25s.BM25(k1=1.5, b=0.75)
    model.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    ours = BM25Retriever.build(rows).index("musique")
    positions = np.arange(len(rows))
    for q in [q for q in ingested.questions if q["dataset"] == "musique"][:40]:
        tokens = [t for t in tokenize(q["question"]) if t in model.vocab_dict]
        expected = model.get_scores(tokens)
        assert np.array_equal(ours.scores_of(ours.token_ids(q["question"]), positions), expected)


def test_tokenize_is_bm25s_tokenize(ingested):
    texts = [p["text"] for p in ingested.passages[:300]] + ["Ünïcode café's 3rd 42 a b THE Eiffel-Tower"]
    assert [tokenize(t) for t in texts] == bm25s.tokenize(
        texts, stopwords="en", return_ids=False, show_progress=False
    )


def test_store_looks_passages_up_by_pid(saved, ingested):
    store = PassageStore.open(saved)
    sample = random.Random(1).sample(ingested.passages, 50)
    assert len(store) == len({p["pid"] for p in ingested.passages})
    for p in sample:
        assert store[p["pid"]] == {k: p[k] for k in ("pid", "dataset", "title", "text", "sentences")}
    found = store.get_many([p["pid"] for p in sample] + ["hotpotqa:missing"])
    assert list(found) == [p["pid"] for p in sample] and "hotpotqa:missing" not in store
    with pytest.raises(KeyError):
        store["hotpotqa:missing"]


@pytest.mark.parametrize("whole_list_max", [0, 64, 1 << 20])
def test_every_path_of_the_top_k_is_exact(monkeypatch, whole_list_max):
    """Queries of common and rare words on a corpus shaped like the copied full-size corpora (a few
    words in most passages, names in a few): whether the threshold algorithm ends early, the shortest
    essential lists are scored whole (raising the threshold) or the lists are read through, the top
    k is what scoring every passage gives, ties by position."""
    from factory.retrieval import topk
    from factory.retrieval.bm25 import BM25Builder

    monkeypatch.setattr(topk, "WHOLE_LIST_MAX", whole_list_max)
    rng = random.Random(7)
    common = ["film", "director", "river", "album", "born", "city"]
    names = [f"name{i}" for i in range(40)]
    texts = []
    for _ in range(3000):
        words = rng.choices(common, k=rng.randint(3, 12)) + rng.choices(names, k=rng.randint(0, 2))
        words += [f"w{rng.randrange(500)}" for _ in range(rng.randint(0, 5))]
        texts.append(" ".join(words))
    builder = BM25Builder()
    builder.add(texts)
    index = builder.finish()
    model = bm25s.BM25(k1=1.5, b=0.75)
    model.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    for _ in range(300):
        words = rng.choices(common, k=rng.randint(1, 3)) + rng.choices(names, k=rng.randint(0, 2))
        query = " ".join(words + [f"w{rng.randrange(500)}"] * rng.randint(0, 1))
        k = rng.choice([1, 2, 5])
        ids = index.token_ids(query)
        docs, scores = index.top(ids, k)
        tokens = [t for t in tokenize(query) if t in model.vocab_dict]
        every = model.get_scores(tokens)
        want = sorted(range(len(texts)), key=lambda d: (-float(every[d]), d))[:k]
        got = sorted(zip(docs.tolist(), scores.tolist()), key=lambda x: (-x[1], x[0]))[:k]
        assert [d for d, _ in got] == want, query
        assert np.array_equal(np.asarray([s for _, s in got], dtype=np.float32), every[want]), query
