"""BM25 over each dataset's passages, in bm25s's index format, searched without scanning the corpus.

Building (``BM25Builder``) streams the passages a batch at a time: each batch is tokenized exactly as
``bm25s.tokenize(..., stopwords="en")`` does and reduced to (document, token, count) entries, which
spill to disk in the index stage, so memory follows the batch and the entries, never a list of
token lists of the whole corpus. The scores are computed with bm25s's arithmetic (``lucene``
BM25, float32 values) and laid out as its CSC matrix, so ``bm25s.BM25.load(folder, mmap=True)``
opens the index and ``get_scores`` gives the same numbers. Each token's documents are also stored
best score first (``impact_*.npy``).

Searching takes the exact top-k from the query tokens' lists in impact order (each token's
documents again, best score first: the threshold algorithm), so it reads the heads of the lists,
never a score for every passage. Scores are summed in float32 in query-token order, as bm25s
does, and ties are broken by pid: the same passages in the same order as scoring every passage.
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import chain
from pathlib import Path

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN

from factory.params.data_sections import IndexParams
from factory.retrieval import topk
from factory.retrieval.base import Hit, rank_positions
from factory.retrieval.mapped import Mappings
from factory.retrieval.store import PassageStore
from factory.utils.errors import FactoryError

_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # bm25s's (and scikit-learn's) token pattern
_STOPWORDS = frozenset(STOPWORDS_EN)
FILES = ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy")  # bm25s's names
IMPACT_FILES = ("impact_data.npy", "impact_indices.npy")  # the same lists, best score first


def tokenize(text: str) -> list[str]:
    """``bm25s.tokenize([text], stopwords="en", return_ids=False)[0]``, without its per-call setup."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


def passage_text(p: dict) -> str:
    return f"{p['title']}. {p['text']}"


# ---------------------------------------------------------------- building


class BM25Builder:
    """One dataset's index from batches of texts; ``finish`` computes the scores and the layout.
    ``params``: k1 and b (``index`` in params.yaml; None: the defaults of
    ``factory.params.data_sections.IndexParams``)."""

    def __init__(self, params: IndexParams | None = None, spill_dir: str | Path | None = None):
        params = params or IndexParams()
        self.k1, self.b = float(params.k1), float(params.b)
        self._ids: dict[str, int] = defaultdict()
        self._ids.default_factory = self._ids.__len__  # an unseen token gets the next id
        self._ids.update((w, i) for i, w in enumerate(sorted(_STOPWORDS)))
        self._stopwords = len(self._ids)
        self._token_id = self._ids.__getitem__
        self.lengths: list[np.ndarray] = []
        self.num_docs = 0
        self._spill = Path(spill_dir) if spill_dir is not None else None
        self._parts: dict[str, list[np.ndarray]] = {"doc": [], "tok": [], "tf": []}
        self._files = None
        if self._spill is not None:
            self._spill.mkdir(parents=True, exist_ok=True)
            self._files = {name: open(self._spill / f"{name}.bin", "wb") for name in self._parts}

    def add(self, texts: Sequence[str]) -> None:
        """Index the next documents (their ids follow the ones added before)."""
        per_doc = [_TOKEN.findall(text.lower()) for text in texts]
        counts = np.fromiter(map(len, per_doc), dtype=np.int64, count=len(per_doc))
        # a token's id: its place in the vocabulary, given on first sight (map() runs in C); the
        # stopwords hold the first ids, so that dropping them is one comparison over the array
        tok = np.fromiter(
            map(self._token_id, chain.from_iterable(per_doc)), dtype=np.int64, count=int(counts.sum())
        )
        doc = np.repeat(np.arange(len(texts), dtype=np.int64), counts)
        kept = tok >= self._stopwords
        tok, doc = tok[kept] - self._stopwords, doc[kept]
        lengths = np.bincount(doc, minlength=len(texts)).astype(np.int64)
        doc += self.num_docs
        key, tf = np.unique((doc << 32) | tok, return_counts=True)  # (doc, token) pairs, doc-major
        part = {
            "doc": (key >> 32).astype(np.int32),
            "tok": (key & 0xFFFFFFFF).astype(np.int32),
            "tf": tf.astype(np.float32),
        }
        for name, values in part.items():
            if self._files is not None:
                self._files[name].write(values.tobytes())
            else:
                self._parts[name].append(values)
        self.lengths.append(lengths)
        self.num_docs += len(texts)

    def _entries(self, name: str, dtype) -> np.ndarray:
        if self._files is None:
            parts = self._parts[name]
            return np.concatenate(parts) if parts else np.array([], dtype=dtype)
        self._files[name].close()
        path = self._spill / f"{name}.bin"
        return np.memmap(path, dtype=dtype, mode="r") if path.stat().st_size else np.array([], dtype=dtype)

    def finish(self) -> DatasetIndex:
        """The CSC score matrix (token-major, documents ascending within a token), as bm25s builds it."""
        doc, tok, tf = (
            self._entries(n, d) for n, d in (("doc", np.int32), ("tok", np.int32), ("tf", np.float32))
        )
        vocab = {w: i - self._stopwords for w, i in self._ids.items() if i >= self._stopwords}
        n_vocab, n_docs = len(vocab), self.num_docs
        lengths = np.concatenate(self.lengths) if self.lengths else np.array([], dtype=np.int64)
        df = np.bincount(tok, minlength=n_vocab)
        # math.log per distinct df, rounded to float32: bm25s's exact idf values
        distinct, inverse = np.unique(df, return_inverse=True)
        idf = np.array(
            [math.log(1 + (n_docs - v + 0.5) / (v + 0.5)) if v else 0.0 for v in distinct.tolist()],
            dtype=np.float32,
        )[inverse]
        avg = lengths.mean() if n_docs else np.float64(0.0)
        # bm25s ("lucene"): tf / (k1 * ((1 - b) + b * len / avg) + tf) in float64, times idf, to float32
        norm = self.k1 * ((1 - self.b) + self.b * lengths.astype(np.float64) / avg) if n_docs else lengths
        data = np.empty(len(tok), dtype=np.float32)
        step = 1 << 22
        for s in range(0, len(tok), step):
            t, d, f = (
                np.asarray(tok[s : s + step]),
                np.asarray(doc[s : s + step]),
                np.asarray(tf[s : s + step], dtype=np.float64),
            )
            data[s : s + step] = idf[t].astype(np.float64) * (f / (norm[d] + f))
        order = np.argsort(tok, kind="stable")  # entries are doc-major: stable keeps docs ascending
        indptr = np.zeros(n_vocab + 1, dtype=np.int64)
        np.cumsum(df, out=indptr[1:])
        data = data[order]
        indices = np.asarray(doc)[order]
        del order
        # each token's documents again, best score first (ties: document order): the search's lists
        token_of = np.repeat(np.arange(n_vocab, dtype=np.int32), df)
        impact = np.lexsort((indices, -data, token_of))
        del token_of
        return DatasetIndex(
            data, indices, indptr, vocab, data[impact], indices[impact], n_docs, self.k1, self.b
        )

    def close(self) -> None:
        for fh in (self._files or {}).values():
            fh.close()


# ---------------------------------------------------------------- one dataset's index


class DatasetIndex:
    """The score matrix of one dataset (CSC: a token's documents and their scores) and its vocabulary."""

    def __init__(self, data, indices, indptr, vocab, impact_data, impact_indices, num_docs, k1, b):
        self.data, self.indices, self.indptr = data, indices, indptr  # documents ascending per token
        self.impact_data, self.impact_indices = impact_data, impact_indices  # scores descending per token
        self.vocab, self.num_docs = vocab, int(num_docs)
        self.k1, self.b = k1, b
        self._local = threading.local()

    def save(self, folder: Path) -> None:
        """bm25s's files (``bm25s.BM25.load(folder, mmap=True)`` reads them) plus the impact-ordered lists."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, values in zip(
            FILES + IMPACT_FILES,
            (self.data, self.indices, self.indptr, self.impact_data, self.impact_indices),
        ):
            np.save(folder / name, values)
        vocab = dict(self.vocab)
        vocab.setdefault("", len(vocab))  # bm25s's empty token (it never matches a query token)
        (folder / "vocab.index.json").write_text(json.dumps(vocab, ensure_ascii=False))
        reference = bm25s.BM25(k1=self.k1, b=self.b)
        params = {
            "k1": self.k1,
            "b": self.b,
            "delta": reference.delta,
            "method": reference.method,
            "idf_method": reference.idf_method,
            "dtype": reference.dtype,
            "int_dtype": reference.int_dtype,
            "num_docs": self.num_docs,
            "version": bm25s.__version__,
            "backend": reference.backend,
        }
        (folder / "params.index.json").write_text(json.dumps(params, indent=4))

    @staticmethod
    def load(folder: Path, mappings: Mappings | None = None) -> DatasetIndex:
        mappings = mappings or Mappings()
        data, indices, indptr, impact_data, impact_indices = (
            mappings.npy(folder / name) for name in FILES + IMPACT_FILES
        )
        vocab = json.loads((folder / "vocab.index.json").read_text(encoding="utf-8"))
        vocab.pop("", None)
        params = json.loads((folder / "params.index.json").read_text())
        return DatasetIndex(
            data,
            indices,
            indptr,
            vocab,
            impact_data,
            impact_indices,
            params["num_docs"],
            params["k1"],
            params["b"],
        )

    def token_ids(self, query: str) -> list[int]:
        """The query's known tokens, in order, repeats kept (each adds its score again, as in bm25s)."""
        vocab = self.vocab
        return [vocab[t] for t in tokenize(query) if t in vocab]

    def postings(self, token: int) -> tuple[np.ndarray, np.ndarray]:
        start, end = int(self.indptr[token]), int(self.indptr[token + 1])
        return self.indices[start:end], self.data[start:end]

    def scores_of(self, ids: Sequence[int], docs: np.ndarray) -> np.ndarray:
        """Exact float32 scores of ``docs`` (unique), summed in query-token order as bm25s sums them:
        each document is looked up in each token's list (binary search, the lists ascend)."""
        scores = np.zeros(len(docs), dtype=np.float32)
        docs = np.asarray(docs, dtype=self.indices.dtype)  # else every search converts a whole list
        for token in ids:
            idx, val = self.postings(token)
            if not len(idx):
                continue
            at = np.minimum(np.searchsorted(idx, docs), len(idx) - 1)
            hit = idx[at] == docs
            scores[hit] += val[at[hit]]
        return scores

    def top(self, ids: Sequence[int], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Every document that can be among the top ``k`` (all those tied with the k-th included), with
        its exact score (``factory.retrieval.topk``)."""
        return topk.top(self, ids, k)

    def scratch(self) -> np.ndarray:
        """A zeroed float32 row of this dataset's documents, one per thread (kept zero between uses)."""
        row = getattr(self._local, "scratch", None)
        if row is None:
            row = self._local.scratch = np.zeros(self.num_docs, dtype=np.float32)
        return row


# ---------------------------------------------------------------- the retriever


class BM25Retriever:
    """BM25 per dataset over a ``PassageStore``; a hit's document id is its position in the store."""

    def __init__(
        self, indexes: dict[str, DatasetIndex], store: PassageStore, mappings: Mappings | None = None
    ):
        self.indexes, self.store = indexes, store
        self._mappings = mappings or Mappings()  # the index files (pages given back every few thousand)
        self._recent = functools.lru_cache(maxsize=1 << 16)(self._pooled)

    @staticmethod
    def build(passages: Iterable[dict], params: IndexParams | None = None) -> BM25Retriever:
        """An in-memory index of a few passages (tests, notebooks); ``factory index`` streams instead.
        ``params``: as in ``BM25Builder``."""
        store = PassageStore.from_rows(passages)
        indexes = {}
        for dataset in store.datasets:
            builder = BM25Builder(params)
            table = store.tables[dataset]
            builder.add(
                [
                    f"{t}. {x}"
                    for t, x in zip(table.column("title").to_pylist(), table.column("text").to_pylist())
                ]
            )
            indexes[dataset] = builder.finish()
        return BM25Retriever(indexes, store)

    def save(self, index_dir: str | Path) -> None:
        self.store.save(index_dir)
        for dataset, index in self.indexes.items():
            index.save(Path(index_dir) / "bm25" / dataset)

    @staticmethod
    def load(index_dir: str | Path, store: PassageStore | None = None) -> BM25Retriever:
        root = Path(index_dir) / "bm25"
        if not root.exists():
            raise FactoryError(
                f"no BM25 index under {root}: run `factory index` (or `dvc repro index`) first"
            )
        store = store if store is not None else PassageStore.open(index_dir)
        mappings = Mappings()
        indexes = {
            f.name: DatasetIndex.load(f, mappings) for f in sorted(p for p in root.iterdir() if p.is_dir())
        }
        return BM25Retriever(indexes, store, mappings)

    def index(self, dataset: str) -> DatasetIndex:
        index = self.indexes.get(dataset)
        if index is None:
            raise FactoryError(f"the index has no dataset {dataset!r} (has {sorted(self.indexes)})")
        return index

    def scores(self, query: str, dataset: str, positions: np.ndarray) -> np.ndarray:
        """Exact scores of the documents at ``positions`` (sorted, unique)."""
        index = self.index(dataset)
        return index.scores_of(index.token_ids(query), positions)

    def positions(self, dataset: str, pool: list[str] | None) -> np.ndarray:
        """Sorted positions of a pool of pids (every document when there is no pool)."""
        if pool is None:
            return np.arange(self.index(dataset).num_docs)
        return np.unique(self.store.positions(dataset, pool))

    def search(self, query: str, dataset: str, top_n: int, pool: list[str] | None = None) -> list[Hit]:
        self._mappings.touched()
        index = self.index(dataset)
        ids = index.token_ids(query)
        if pool is not None:  # a question's own pool: a few passages, each scored
            docs = self.positions(dataset, pool)
            return rank_positions(self.store, dataset, docs, index.scores_of(ids, docs), top_n)
        return list(self._recent(dataset, tuple(ids), top_n))

    def _pooled(self, dataset: str, ids: tuple[int, ...], top_n: int) -> tuple[Hit, ...]:
        """The top ``top_n`` of the whole dataset for these tokens (the same tokens asked again, by
        another question or sample, are answered from memory)."""
        index = self.index(dataset)
        docs, scores = index.top(ids, top_n) if ids else (np.empty(0, np.int64), np.empty(0, np.float32))
        hits = rank_positions(self.store, dataset, docs, scores, top_n)
        if len(hits) < top_n:  # fewer passages hold a query token than asked for: the rest score 0,
            taken = {h.pid for h in hits}  # and among them the first pids win the tie
            zeros = self.store.first_pids(dataset, top_n + len(taken))
            hits += [Hit(p, 0.0) for p in zeros if p not in taken][: top_n - len(hits)]
        return tuple(hits)
