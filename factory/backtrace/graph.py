"""The graph G of a trajectory and the supporting subgraph S_q (see ``factory.backtrace.labels`` for the
rules).

``build_graph`` applies the DTKG rule filter and links the triplets' entity names to nodes;
``supporting_subgraph`` finds the triplets on paths between initial and target entities.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from factory.backtrace.linking import Embedder, Linker
from factory.backtrace.names import is_title_case_surface
from factory.backtrace.nodes import (
    _merge,
    is_specific,
    names_inside_others,
    node_key,
    node_keys,
    remember,
)
from factory.params.label_sections import BacktraceParams
from factory.params.vocab import BACKTRACE_MODES
from factory.utils.errors import FactoryError

_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


_RELATION_WORDS: dict[str, frozenset[str]] = {}


def _relation_words(relation: str) -> frozenset[str]:
    words = _RELATION_WORDS.get(relation)
    if words is None:
        words = remember(
            _RELATION_WORDS, relation, frozenset(_WORD.findall(_CAMEL.sub(r"\1 \2", relation).lower()))
        )
    return words


def is_admin_relation(relation: str, params: BacktraceParams | None = None) -> bool:
    """DTKG rule filter: the relation contains one of ``params.admin_relations`` as a word
    ("imdb id", "source_url", "ISBN", "dataVersion" match; "identified by", "sourced" do not).
    ``params``: None = the defaults of ``factory.params.label_sections.BacktraceParams``."""
    admin = (params or BacktraceParams()).admin_relations
    return not _relation_words(relation or "").isdisjoint(_admin_set(tuple(admin)))


@lru_cache(maxsize=64)
def _admin_set(admin_relations: tuple[str, ...]) -> frozenset[str]:
    return frozenset(w.lower() for w in admin_relations)


@dataclass
class Graph:
    """The graph G of one trajectory after the rule filter."""

    edges: list[tuple[str, str, str]]  # (triplet_id, subject node, object node), creation order
    linker: Linker
    admin_dropped: int
    admin_dropped_ids: list[str] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # containment links (no triplet), sorted
    # node -> ids of the triplets whose two names differ as written but are that one node ("The Jewel of
    # the Nile" / "Jewel of the Nile"): a self-loop lies on no path, so these ride with their node
    loops: dict[str, list[str]] = field(default_factory=dict)
    _adjacency: dict[str, set[str]] | None = None
    _explored: dict[Any, list[str]] = field(default_factory=dict)  # per trajectory id (see explored_entities)

    @property
    def nodes(self) -> list[str]:
        return sorted({n for _, s, o in self.edges for n in (s, o)})

    def adjacency(self) -> dict[str, set[str]]:
        """Undirected adjacency without self-loops: the triplets' edges and the containment links."""
        if self._adjacency is None:
            adj: dict[str, set[str]] = defaultdict(set)
            for _, s, o in self.edges:
                if s != o:
                    adj[s].add(o)
                    adj[o].add(s)
            for a, b in self.links:
                adj[a].add(b)
                adj[b].add(a)
            self._adjacency = adj
        return self._adjacency


def find_containment_links(
    node_of: dict[str, str],
    names: Sequence[str],
    max_containers: int,
    proper: Callable[[list[str]], set[str]] | None = None,
    inside: list[str] | None = None,
) -> list[tuple[str, str]]:
    """Links (sorted node pairs) between a specific name's node and the nodes of every other name that
    contains it as whole words, when the two were not merged into one node: "cincinnati" and
    "southwest ohio including cincinnati", "west chicago" and "west chicago high school". A link is no
    triplet: paths may run through it, but it is never labelled. Only specific names link
    (``nodes.is_specific``: "8", "1975", "us", "film" never do; ``proper(names)`` returns those of
    the other names that count as specific all the same, e.g. written in title case: "Lake District"),
    and a name inside more than ``max_containers`` other nodes is a hub ("united states") and links to
    none of them. ``inside``: ``nodes.names_inside_others(names)`` when the caller has it."""
    if inside is None:
        inside = names_inside_others(list(names))
    padded = [f" {n} " for n in names]
    weak = [n for n in inside if not is_specific(n)]
    allowed = proper(weak) if weak and proper is not None else set()
    out: set[tuple[str, str]] = set()
    for name in inside:
        if not is_specific(name) and name not in allowed:
            continue
        pad = f" {name} "
        own = node_of[name]
        size = len(name)
        containers = {node_of[m] for m, q in zip(names, padded) if len(m) > size and pad in q} - {own}
        if not containers or len(containers) > max_containers:
            continue
        out.update((own, c) if own < c else (c, own) for c in containers)
    return sorted(out)


def build_graph(
    triplets: Sequence[dict], params: BacktraceParams | None = None, embedder: Embedder | None = None
) -> Graph:
    """G from a trajectory's triplets: rule filter (``params.admin_relations``), normalised nodes,
    linked variants merged, and (with ``params.containment_links``) links between names that stay
    apart (``find_containment_links``). ``embedder``: the loaded ``params.embedding_model`` (None: no
    embedding tier). ``params``: None = the defaults of ``factory.params.label_sections.BacktraceParams``."""
    params = params or BacktraceParams()
    kept, dropped = _rule_filter(triplets, params.admin_relations)
    key, fast = node_key, node_keys  # memo lookup; a miss (None) or an empty key falls back to node_key
    subjects = [fast(t["subject"]) or key(t["subject"]) for t in kept]
    objects = [fast(t["object"]) or key(t["object"]) for t in kept]
    unique = sorted(set(subjects).union(objects))
    containment = params.containment
    inside = names_inside_others(unique) if containment and len(unique) > 1 else []
    surfaces = _Surfaces(kept, subjects, objects)
    # long names merge only when written as a title somewhere in G (nodes.merge_variants)
    titles = surfaces.titles(params.merge_max_words)
    distinct = zip(subjects, objects)  # the pairs are read only if a merge is proposed
    node_of = _merge(unique, containment, distinct, inside, params.merge_max_words, titles)
    node = node_of.__getitem__
    edges = list(zip([t["triplet_id"] for t in kept], map(node, subjects), map(node, objects)))
    loops: dict[str, list[str]] = {}
    for t, (tid, s, o) in zip(kept, edges):
        if s == o and t["subject"].strip() != t["object"].strip():
            loops.setdefault(s, []).append(tid)
    linker = Linker(node_of, params, embedder, names=unique)
    graph_links = []
    if params.containment_links and containment:
        graph_links = find_containment_links(
            node_of, unique, params.link_max_containers, surfaces.title_cased, inside
        )
    return Graph(edges, linker, len(dropped), dropped, graph_links, loops=loops)


def _rule_filter(
    triplets: Sequence[dict], admin_relations: Sequence[str]
) -> tuple[Sequence[dict], list[str]]:
    """(the triplets the DTKG rule filter keeps, the ids of those it drops)."""
    admin = _admin_set(tuple(admin_relations))
    words, memo = _relation_words, _RELATION_WORDS.get
    ok = [admin.isdisjoint(memo(t["relation"]) or words(t["relation"])) for t in triplets]
    if all(ok):
        return triplets, []
    dropped = [t["triplet_id"] for t, good in zip(triplets, ok) if not good]
    return [t for t, good in zip(triplets, ok) if good], dropped


@dataclass
class _Surfaces:
    """The names of G's triplets as written (``raw``) beside their normalised forms."""

    kept: Sequence[dict]
    subjects: list[str]
    objects: list[str]

    def _pairs(self):
        for t, s_name, o_name in zip(self.kept, self.subjects, self.objects):
            yield t["subject"], s_name
            yield t["object"], o_name

    def titles(self, max_words: int) -> frozenset[str]:
        """The names of more than ``max_words`` words written in title case somewhere in G."""
        return frozenset(
            name for raw, name in self._pairs() if name.count(" ") >= max_words and is_title_case_surface(raw)
        )

    def title_cased(self, weak: list[str]) -> set[str]:
        """Those of ``weak`` written in title case somewhere in G (``find_containment_links``' ``proper``)."""
        wanted = set(weak)
        return {name for raw, name in self._pairs() if name in wanted and is_title_case_surface(raw)}


def link(mention: str, graph: Graph) -> list[str]:
    """Nodes of G a mention refers to (exact, containment, fuzzy, [embedding]); [] if none."""
    return graph.linker.link(mention)


# ---------------------------------------------------------------------- supporting subgraph


def _reach(adj: dict[str, set[str]], sources: Iterable[str]) -> set[str]:
    seen = set(sources)
    queue = deque(seen)
    while queue:
        u = queue.popleft()
        for v in adj.get(u, ()):
            if v not in seen:
                seen.add(v)
                queue.append(v)
    return seen


def _undirected_shortest(graph: Graph, initial: Sequence[str], targets: Sequence[str]) -> set[str]:
    # Per initial entity i: BFS distances d from i (stopped once every target is reached), then a walk
    # back from the targets along edges that come one step closer to i. The nodes reached lie on a
    # shortest i-t path for some t; an edge is on one iff both its ends were reached and their
    # distances differ by one (parallel edges all qualify, self-loops never). Equivalent to the union
    # of networkx all_shortest_paths over every (i, t), in O(|I| * (V + E)).
    adj = graph.adjacency()
    ends = {t for t in targets if t in adj}
    if not ends:
        return set()
    on_path: list[tuple[dict[str, int], set[str]]] = []
    for i in set(initial):
        if i not in adj:
            continue
        left = ends - {i}
        if not left:
            continue
        dist = {i: 0}
        frontier = [i]
        d = 0
        while frontier and left:
            d += 1
            nxt = []
            for u in frontier:
                for v in adj[u]:
                    if v not in dist:
                        dist[v] = d
                        nxt.append(v)
                        left.discard(v)
            frontier = nxt
        reached = [t for t in ends if t != i and t in dist]
        if not reached:
            continue
        back = set(reached)
        stack = reached
        while stack:
            v = stack.pop()
            dv = dist[v] - 1
            for u in adj[v]:
                if u not in back and dist.get(u) == dv:
                    back.add(u)
                    stack.append(u)
        on_path.append((dist, back))
    kept: set[str] = set()
    for dist, back in on_path:
        for tid, s, o in graph.edges:
            if s in back and o in back and (dist[s] - dist[o]) in (1, -1):
                kept.add(tid)
    return kept


def _directed_reach(graph: Graph, initial: Sequence[str], targets: Sequence[str]) -> set[str]:
    succ: dict[str, set[str]] = defaultdict(set)
    pred: dict[str, set[str]] = defaultdict(set)
    for _, s, o in graph.edges:
        if s != o:
            succ[s].add(o)
            pred[o].add(s)
    for a, b in graph.links:  # a containment link names one thing twice: both directions
        succ[a].add(b)
        succ[b].add(a)
        pred[a].add(b)
        pred[b].add(a)
    if not initial or not targets:
        return set()
    from_i = _reach(succ, initial)
    to_t = _reach(pred, targets)
    return {tid for tid, s, o in graph.edges if s != o and s in from_i and o in to_t}


def _undirected_simple(
    graph: Graph, initial: Sequence[str], targets: Sequence[str], cutoff: int | None
) -> set[str]:
    import networkx as nx

    by_pair: dict[tuple[str, str], list[str]] = defaultdict(list)
    g = nx.Graph()
    for tid, s, o in graph.edges:
        if s != o:
            by_pair[(s, o) if s < o else (o, s)].append(tid)
            g.add_edge(s, o)
    g.add_edges_from(graph.links)  # no triplet of their own: by_pair has none for them
    pairs: set[tuple[str, str]] = set()
    for i in sorted(set(initial)):
        if i not in g:
            continue
        ends = sorted({t for t in targets if t != i and t in g})
        if not ends:
            continue
        for path in nx.all_simple_paths(g, i, ends, cutoff=cutoff):
            for a, b in itertools.pairwise(path):
                pairs.add((a, b) if a < b else (b, a))
    return {tid for pair in pairs for tid in by_pair[pair]}


def supporting_subgraph(
    graph: Graph,
    initial: Sequence[str],
    targets: Sequence[str],
    params: BacktraceParams | None = None,
    mode: str | None = None,
) -> set[str]:
    """S_q: ids of the triplets on paths between the initial and the target entities (see module doc),
    plus the triplets that name one node twice (``Graph.loops``) at every node of those paths and at
    every initial entity that is itself a target. ``mode``: one of ``BACKTRACE_MODES`` (None:
    ``params.mode``); ``undirected_simple`` stops at ``params.simple_cutoff`` triplets. ``params``: None
    = the defaults of ``factory.params.label_sections.BacktraceParams``."""
    params = params or BacktraceParams()
    mode = params.mode if mode is None else mode
    if mode == "undirected_shortest":
        kept = _undirected_shortest(graph, initial, targets)
    elif mode == "directed_reach":
        kept = _directed_reach(graph, initial, targets)
    elif mode == "undirected_simple":
        kept = _undirected_simple(graph, initial, targets, params.simple_cutoff)
    else:
        raise FactoryError(f"unknown backtrace mode {mode!r}; expected one of {', '.join(BACKTRACE_MODES)}")
    if graph.loops:
        on_paths = {n for tid, s, o in graph.edges if tid in kept for n in (s, o)}
        on_paths.update(set(initial).intersection(targets))
        kept.update(tid for n in on_paths for tid in graph.loops.get(n, ()))
    return kept
