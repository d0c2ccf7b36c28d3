"""Knowledge backtracing (DESIGN §2): which generations of a trajectory contributed to its answer.

Pure functions over a trajectory record (``schemas.TRAJECTORY`` as ``read_rows`` gives it):

- ``build_graph``: the DTKG rule filter drops triplets whose relation contains an administrative
  keyword as a word (``id``, ``source``, ``url`` ...); the rest form the graph G whose nodes are
  normalised entity names with linked variants merged (``factory.linking``).
- ``initial_entities``: nodes linked from the entities of the FIRST explore step's pairs (fallback:
  nodes named in the question).
- ``target_entities``: per target mode (below).
- ``supporting_subgraph``: the triplets S_q on paths between I and T, per mode:
  ``undirected_shortest`` (default) — union of all shortest paths between every (i, t) on the
  undirected multigraph view, computed exactly from BFS distances (an edge u-v lies on a shortest
  i-t path iff d(i,u) + 1 + d(v,t) == d(i,t)); ``directed_reach`` — s->o kept iff s is reachable
  from I (or in I) and some t in T is reachable from o (or o in T); ``undirected_simple`` — all
  simple paths of at most ``simple_cutoff`` triplets (networkx ``all_simple_paths``; ``None`` = no
  cutoff, the naive baseline).
- ``backtrace``: the labels row (``schemas.LABELS``).

Rules this module chooses (and tests):

- Parallel triplets (duplicates, or two relations between the same two nodes) are alternative edges
  of the multigraph: all of them are on a path when one is.
- A self-loop (subject and object are the same node after linking) lies on no path, in every mode.
- i == t: when an initial entity is itself a target, the zero-length path contains no triplet, so
  that pair contributes nothing; triplets touching it count only if they lie on a path between
  *another* (i, t) pair (or, in ``directed_reach``, on a walk I -> ... -> T of length >= 1).
- Target modes: ``thought_and_answer`` (paper) = nodes named in the final thought and in the answer
  (longest mention first, spans consumed), plus nodes containing the normalised answer as whole words;
  if the answer yields no node that way it is linked like a mention (containment, fuzzy).
  ``answer_only`` = the answer's nodes alone; ``gold_answer`` (oracle) = the gold answers' nodes
  (``gold_answers`` argument, else the trajectory's ``answers``); ``question_only`` = nodes named in
  the question (a no-answer control: for chain questions it usually finds nothing beyond I).
- Yes/no and comparison answers (the rule DESIGN §2 asks for): the *compared entities* C are the
  initial entities plus the nodes named in the question. When the answer is yes/no, or all its
  nodes are compared entities ("Which film is newer, A or B?" -> "B"), the answer names no evidence;
  the targets are then the compared entities' attribute values named in the final thought: nodes
  mentioned in the thought that are not in C and are connected to some member of C in G. This
  applies to ``answer_only`` and ``gold_answer``; ``thought_and_answer`` already contains those nodes.
- Labels: a triplet is contributive iff in S_q; a complete step iff it produced >= 1 S_q triplet;
  an explore pair iff its completion produced one; an explore step is kept iff >= 1 contributive pair
  (keeping only those); the final answer step (the ``final`` step, else the last sufficient explore
  step) is always kept.
- Tokens: every count uses the one tokenizer given (default: whitespace tokens), so the figures are
  in one unit. total = sum over steps of tokens(output); filtered = tokens of dropped steps + for each
  kept step that lost pairs/triplets, tokens(output) - tokens(output re-rendered with only the kept
  units) (floored at 0; a kept step that lost nothing is not re-rendered). fa_ratio = filtered / total
  (0 when total is 0).
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from factory.agent.format import render_complete, render_explore
from factory.config import BACKTRACE_MODES, TARGET_MODES, BacktraceParams
from factory.errors import FactoryError
from factory.linking import Embedder, Linker, merge_variants, node_key, normalize_entity

ADMIN_RELATIONS: tuple[str, ...] = tuple(BacktraceParams().admin_relations)
DEFAULT = ADMIN_RELATIONS  # the brief's name for the default keyword list
MODES = BACKTRACE_MODES
YES_NO = frozenset({"yes", "no"})
_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


class BadTrajectory(FactoryError):
    """A trajectory record that cannot be backtraced; names the trajectory and the field."""

    def __init__(self, trajectory_id: str, field: str, reason: str):
        self.trajectory_id, self.field, self.reason = trajectory_id, field, reason
        super().__init__(f"trajectory {trajectory_id!r}: field {field!r}: {reason}")


# ---------------------------------------------------------------------- tokens


class TokenCounter:
    """Counts tokens of generated text: whitespace by default, an object with ``count_tokens(text)``,
    or a Hugging Face tokenizer (``encode`` without special tokens). ``name`` is recorded in labels."""

    def __init__(self, tokenizer: Any = None):
        if tokenizer is None:
            self.name, self._count = "whitespace", _whitespace_count
        elif isinstance(tokenizer, TokenCounter):
            self.name, self._count = tokenizer.name, tokenizer._count
        elif hasattr(tokenizer, "count_tokens"):
            self.name = str(getattr(tokenizer, "name", type(tokenizer).__name__))
            self._count = tokenizer.count_tokens
        elif hasattr(tokenizer, "encode"):
            self.name = "hf:" + str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__)
            self._count = lambda text: len(tokenizer.encode(text, add_special_tokens=False))
        else:
            raise FactoryError(f"tokenizer {tokenizer!r}: needs count_tokens(text) or encode(text)")

    def __call__(self, text: str | None) -> int:
        return int(self._count(text or "")) if text else 0


def _whitespace_count(text: str) -> int:
    return len(text.split())


# ---------------------------------------------------------------------- validation


def _check(trajectory: Any) -> str:
    if not isinstance(trajectory, dict):
        raise BadTrajectory("?", "record", f"expected a dict, got {type(trajectory).__name__}")
    tid = trajectory.get("trajectory_id")
    if not isinstance(tid, str) or not tid:
        raise BadTrajectory(str(tid), "trajectory_id", "missing or not a string")
    steps, triplets = trajectory.get("steps"), trajectory.get("triplets")
    if not isinstance(steps, list):
        raise BadTrajectory(tid, "steps", "missing or not a list")
    if not isinstance(triplets, list):
        raise BadTrajectory(tid, "triplets", "missing or not a list")
    indices = set()
    for n, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("index"), int):
            raise BadTrajectory(tid, f"steps[{n}].index", "missing or not an integer")
        if step.get("kind") not in ("explore", "complete", "final"):
            raise BadTrajectory(tid, f"steps[{n}].kind", f"must be explore|complete|final, got {step.get('kind')!r}")
        indices.add(step["index"])
    seen = set()
    for n, trip in enumerate(triplets):
        if not isinstance(trip, dict):
            raise BadTrajectory(tid, f"triplets[{n}]", "not a record")
        for key in ("triplet_id", "subject", "relation", "object"):
            if not isinstance(trip.get(key), str):
                raise BadTrajectory(tid, f"triplets[{n}].{key}", "missing or not a string")
        if trip["triplet_id"] in seen:
            raise BadTrajectory(tid, f"triplets[{n}].triplet_id", f"duplicate id {trip['triplet_id']!r}")
        seen.add(trip["triplet_id"])
        if trip.get("step_index") not in indices:
            raise BadTrajectory(tid, f"triplets[{n}].step_index", f"{trip.get('step_index')!r} is not the index of a step")
    return tid


# ---------------------------------------------------------------------- graph


@lru_cache(maxsize=1 << 14)
def _relation_words(relation: str) -> frozenset[str]:
    return frozenset(_WORD.findall(_CAMEL.sub(r"\1 \2", relation).lower()))


def is_admin_relation(relation: str, admin_relations: Iterable[str] = ADMIN_RELATIONS) -> bool:
    """DTKG rule filter: the relation contains an administrative keyword as a word
    ("imdb id", "source_url", "ISBN", "dataVersion" match; "identified by", "sourced" do not)."""
    return not _relation_words(relation or "").isdisjoint(_admin_set(tuple(admin_relations)))


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
    _adjacency: dict[str, set[str]] | None = None

    @property
    def nodes(self) -> list[str]:
        return sorted({n for _, s, o in self.edges for n in (s, o)})

    def adjacency(self) -> dict[str, set[str]]:
        """Undirected adjacency without self-loops."""
        if self._adjacency is None:
            adj: dict[str, set[str]] = defaultdict(set)
            for _, s, o in self.edges:
                if s != o:
                    adj[s].add(o)
                    adj[o].add(s)
            self._adjacency = adj
        return self._adjacency


def build_graph(
    triplets: Sequence[dict],
    *,
    admin_relations: Iterable[str] = ADMIN_RELATIONS,
    containment: bool = True,
    fuzzy_threshold: float = 88.0,
    embedder: Embedder | None = None,
) -> Graph:
    """G from a trajectory's triplets: rule filter, normalised nodes, linked variants merged."""
    admin = _admin_set(tuple(admin_relations))
    kept, dropped = [], []
    for t in triplets:
        if admin.isdisjoint(_relation_words(t["relation"] or "")):
            kept.append(t)
        else:
            dropped.append(t["triplet_id"])
    keys = [(t["triplet_id"], node_key(t["subject"]), node_key(t["object"])) for t in kept]
    node_of = merge_variants(
        [n for _, s, o in keys for n in (s, o)], containment=containment, distinct=[(s, o) for _, s, o in keys]
    )
    edges = [(tid, node_of[s], node_of[o]) for tid, s, o in keys]
    linker = Linker(node_of, containment=containment, fuzzy_threshold=fuzzy_threshold, embedder=embedder)
    return Graph(edges, linker, len(dropped), dropped)


def link(mention: str, graph: Graph) -> list[str]:
    """Nodes of G a mention refers to (exact, containment, fuzzy, [embedding]); [] if none."""
    return graph.linker.link(mention)


# ---------------------------------------------------------------------- initial and target entities


def explore_steps(trajectory: dict) -> list[dict]:
    return sorted((s for s in trajectory["steps"] if s["kind"] == "explore"), key=lambda s: s["index"])


def final_step(trajectory: dict) -> dict | None:
    """The final answer step: the last ``final`` step, else the last sufficient explore step."""
    steps = sorted(trajectory["steps"], key=lambda s: s["index"])
    for kind_ok in (lambda s: s["kind"] == "final", lambda s: s["kind"] == "explore" and s.get("sufficient")):
        found = [s for s in steps if kind_ok(s)]
        if found:
            return found[-1]
    return None


def final_text(trajectory: dict) -> tuple[str, str]:
    """(final thought, answer): the trajectory's fields, else the final answer step's."""
    step = final_step(trajectory) or {}
    thought = trajectory.get("final_thought") or step.get("thought") or ""
    answer = trajectory.get("answer") or step.get("answer") or ""
    return thought, answer


def initial_entities(trajectory: dict, graph: Graph) -> list[str]:
    """Nodes linked from the entities of the first explore step's pairs; fallback: nodes named in
    the question. Sorted."""
    explores = explore_steps(trajectory)
    found: set[str] = set()
    if explores:
        for pair in explores[0].get("pairs") or []:
            found.update(graph.linker.link(pair.get("entity") or ""))
    if not found:
        found.update(graph.linker.mentions(trajectory.get("question") or ""))
    return sorted(found)


def answer_nodes(answer: str, graph: Graph) -> list[str]:
    """Nodes an answer names: nodes mentioned in it, plus nodes containing it as whole words; when
    that finds nothing, the answer linked as a mention. Yes/no answers name no node."""
    if not answer or normalize_entity(answer) in YES_NO:
        return []
    linker = graph.linker
    found = set(linker.mentions(answer)) | set(linker.containing(answer))
    if not found:
        found.update(linker.link(answer))
    return sorted(found)


def _component_members(graph: Graph, sources: Iterable[str]) -> set[str]:
    return _reach(graph.adjacency(), sources)


def comparison_targets(trajectory: dict, graph: Graph, initial: Sequence[str]) -> list[str]:
    """The compared entities' attribute values named in the final thought: thought mentions that are
    not compared entities (initial entities + question nodes) and connect to one in G."""
    thought, _ = final_text(trajectory)
    compared = set(initial) | set(graph.linker.mentions(trajectory.get("question") or ""))
    connected = _component_members(graph, compared)
    return sorted(n for n in graph.linker.mentions(thought) if n not in compared and n in connected)


def _is_comparison_answer(answer: str, nodes: Sequence[str], compared: set[str]) -> bool:
    return normalize_entity(answer) in YES_NO or (bool(nodes) and set(nodes) <= compared)


def target_entities(
    trajectory: dict,
    graph: Graph,
    target_mode: str = "thought_and_answer",
    *,
    initial: Sequence[str] | None = None,
    gold_answers: Sequence[str] | None = None,
) -> list[str]:
    """Target entities T for a target mode (see the module docstring). Sorted."""
    linker = graph.linker
    if initial is None:
        initial = initial_entities(trajectory, graph)
    thought, answer = final_text(trajectory)
    if target_mode == "thought_and_answer":
        return sorted(set(linker.mentions(thought)) | set(answer_nodes(answer, graph)))
    if target_mode == "question_only":
        return sorted(set(linker.mentions(trajectory.get("question") or "")))
    if target_mode == "answer_only":
        answers = [answer] if answer else []
    elif target_mode == "gold_answer":
        answers = list(gold_answers if gold_answers is not None else trajectory.get("answers") or [])
    else:
        raise FactoryError(f"unknown target_mode {target_mode!r}; expected one of {', '.join(TARGET_MODES)}")
    found = set()
    for a in answers:
        found.update(answer_nodes(a, graph))
    compared = set(initial) | set(linker.mentions(trajectory.get("question") or ""))
    if answers and _is_comparison_answer(answers[0], sorted(found), compared):
        found.update(comparison_targets(trajectory, graph, initial))
    return sorted(found)


# ---------------------------------------------------------------------- supporting subgraph


def _bfs(adj: dict[str, set[str]], source: str) -> dict[str, int]:
    dist = {source: 0}
    frontier = [source]
    d = 0
    while frontier:
        d += 1
        nxt = []
        for u in frontier:
            for v in adj.get(u, ()):
                if v not in dist:
                    dist[v] = d
                    nxt.append(v)
        frontier = nxt
    return dist


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
    adj = graph.adjacency()
    sources = [i for i in initial if i in adj]
    ends = [t for t in targets if t in adj]
    if not sources or not ends:
        return set()
    dist = {n: _bfs(adj, n) for n in set(sources) | set(ends)}
    kept: set[str] = set()
    edges = [(tid, s, o) for tid, s, o in graph.edges if s != o]
    for i in sources:
        di = dist[i]
        for t in ends:
            total = di.get(t)
            if t == i or total is None:
                continue
            dt = dist[t]
            for tid, s, o in edges:
                if tid in kept:
                    continue
                a, b = di.get(s), dt.get(o)
                if a is not None and b is not None and a + b + 1 == total:
                    kept.add(tid)
                    continue
                a, b = di.get(o), dt.get(s)
                if a is not None and b is not None and a + b + 1 == total:
                    kept.add(tid)
    return kept


def _directed_reach(graph: Graph, initial: Sequence[str], targets: Sequence[str]) -> set[str]:
    succ: dict[str, set[str]] = defaultdict(set)
    pred: dict[str, set[str]] = defaultdict(set)
    for _, s, o in graph.edges:
        if s != o:
            succ[s].add(o)
            pred[o].add(s)
    if not initial or not targets:
        return set()
    from_i = _reach(succ, initial)
    to_t = _reach(pred, targets)
    return {tid for tid, s, o in graph.edges if s != o and s in from_i and o in to_t}


def _undirected_simple(graph: Graph, initial: Sequence[str], targets: Sequence[str], cutoff: int | None) -> set[str]:
    import networkx as nx

    by_pair: dict[tuple[str, str], list[str]] = defaultdict(list)
    g = nx.Graph()
    for tid, s, o in graph.edges:
        if s != o:
            by_pair[(s, o) if s < o else (o, s)].append(tid)
            g.add_edge(s, o)
    pairs: set[tuple[str, str]] = set()
    for i in sorted(set(initial)):
        if i not in g:
            continue
        ends = sorted({t for t in targets if t != i and t in g})
        if not ends:
            continue
        for path in nx.all_simple_paths(g, i, ends, cutoff=cutoff):
            for a, b in zip(path, path[1:]):
                pairs.add((a, b) if a < b else (b, a))
    return {tid for pair in pairs for tid in by_pair[pair]}


def supporting_subgraph(
    graph: Graph,
    initial: Sequence[str],
    targets: Sequence[str],
    mode: str = "undirected_shortest",
    simple_cutoff: int | None = 4,
) -> set[str]:
    """S_q: ids of the triplets on paths between the initial and the target entities (see module doc)."""
    if mode == "undirected_shortest":
        return _undirected_shortest(graph, initial, targets)
    if mode == "directed_reach":
        return _directed_reach(graph, initial, targets)
    if mode == "undirected_simple":
        return _undirected_simple(graph, initial, targets, simple_cutoff)
    raise FactoryError(f"unknown backtrace mode {mode!r}; expected one of {', '.join(MODES)}")


# ---------------------------------------------------------------------- step labels and tokens


@dataclass
class StepLabels:
    kept_pair_ids: list[str]
    kept_step_indices: list[int]
    filtered_tokens: int
    total_tokens: int


def step_labels(trajectory: dict, kept: set[str], counter: TokenCounter, _cache: dict | None = None) -> StepLabels:
    """Pair/step labels and token accounting for a set of contributive triplet ids."""
    triplets = trajectory["triplets"]
    by_id = {t["triplet_id"]: t for t in triplets}
    good_steps = {by_id[tid]["step_index"] for tid in kept}
    good_pairs = {by_id[tid].get("pair_id") for tid in kept} - {None}
    steps = sorted(trajectory["steps"], key=lambda s: s["index"])
    for step in steps:  # a complete step answers its pair: its contributive triplets make the pair contributive
        if step["kind"] == "complete" and step["index"] in good_steps and step.get("pair_id"):
            good_pairs.add(step["pair_id"])
    final = final_step(trajectory)
    final_index = final["index"] if final is not None else None
    count = _cache if _cache is not None else {}

    def tokens(step: dict) -> int:
        idx = step["index"]
        if idx not in count:
            count[idx] = counter(step.get("output"))
        return count[idx]

    kept_pairs: list[str] = []
    kept_steps: list[int] = []
    total = filtered = 0
    for step in steps:
        n = tokens(step)
        total += n
        idx, kind = step["index"], step["kind"]
        if idx == final_index:
            kept_steps.append(idx)
            continue
        if kind == "explore":
            pairs = step.get("pairs") or []
            keep = [p for p in pairs if p["pair_id"] in good_pairs]
            if not keep:
                filtered += n
                continue
            kept_steps.append(idx)
            kept_pairs.extend(p["pair_id"] for p in keep)
            if len(keep) < len(pairs):
                rendered = render_explore(step.get("thought") or "", [(p["entity"], p["relation"]) for p in keep])
                filtered += max(0, n - counter(rendered))
        elif kind == "complete":
            if idx not in good_steps:
                filtered += n
                continue
            kept_steps.append(idx)
            own = [by_id[t] for t in step.get("triplet_ids") or [] if t in by_id]
            keep = [t for t in own if t["triplet_id"] in kept]
            if len(keep) < len(own):
                rendered = render_complete([(t["subject"], t["relation"], t["object"]) for t in keep])
                filtered += max(0, n - counter(rendered))
        else:  # a 'final' step that is not the last one: superseded, not the answer
            filtered += n
    return StepLabels(kept_pairs, sorted(kept_steps), filtered, total)


# ---------------------------------------------------------------------- entry points


def backtrace_modes(
    trajectory: dict,
    modes: Sequence[str] = ("undirected_shortest",),
    target_modes: Sequence[str] = ("thought_and_answer",),
    *,
    tokenizer: Any = None,
    simple_cutoff: int | None = 4,
    fuzzy_threshold: float = 88.0,
    containment: bool = True,
    admin_relations: Iterable[str] = ADMIN_RELATIONS,
    gold_answers: Sequence[str] | None = None,
    embedder: Embedder | None = None,
) -> list[dict]:
    """Labels rows for every (mode, target mode), sharing the graph, links and token counts."""
    tid = _check(trajectory)
    for m in modes:
        if m not in MODES:
            raise FactoryError(f"unknown backtrace mode {m!r}; expected one of {', '.join(MODES)}")
    counter = tokenizer if isinstance(tokenizer, TokenCounter) else TokenCounter(tokenizer)
    graph = build_graph(
        trajectory["triplets"], admin_relations=admin_relations, containment=containment,
        fuzzy_threshold=fuzzy_threshold, embedder=embedder,
    )
    initial = initial_entities(trajectory, graph)
    order = {t["triplet_id"]: n for n, t in enumerate(trajectory["triplets"])}
    token_cache: dict[int, int] = {}
    rows = []
    for target_mode in target_modes:
        targets = target_entities(trajectory, graph, target_mode, initial=initial, gold_answers=gold_answers)
        for mode in modes:
            kept = supporting_subgraph(graph, initial, targets, mode, simple_cutoff)
            labels = step_labels(trajectory, kept, counter, token_cache)
            rows.append(
                {
                    "trajectory_id": tid,
                    "question_id": trajectory.get("question_id") or "",
                    "mode": mode,
                    "target_mode": target_mode,
                    "correct": bool(trajectory.get("correct")),
                    "initial_entities": list(initial),
                    "target_entities": list(targets),
                    "kept_triplet_ids": sorted(kept, key=order.__getitem__),
                    "kept_pair_ids": labels.kept_pair_ids,
                    "kept_step_indices": labels.kept_step_indices,
                    "path_found": bool(kept),
                    "admin_dropped": graph.admin_dropped,
                    "filtered_tokens": labels.filtered_tokens,
                    "total_tokens": labels.total_tokens,
                    "fa_ratio": labels.filtered_tokens / labels.total_tokens if labels.total_tokens else 0.0,
                    "tokenizer": counter.name,
                }
            )
    return rows


def backtrace(
    trajectory: dict,
    mode: str = "undirected_shortest",
    target_mode: str = "thought_and_answer",
    *,
    tokenizer: Any = None,
    simple_cutoff: int | None = 4,
    fuzzy_threshold: float = 88.0,
    containment: bool = True,
    admin_relations: Iterable[str] = DEFAULT,
    gold_answers: Sequence[str] | None = None,
    embedder: Embedder | None = None,
) -> dict:
    """Backtrace one trajectory: the ``schemas.LABELS`` row for one mode and target mode.

    ``tokenizer``: None (whitespace tokens), an object with ``count_tokens(text)``, a HF tokenizer
    or a ``TokenCounter``; its name is recorded. ``gold_answers`` overrides the trajectory's
    ``answers`` for ``target_mode="gold_answer"``. ``embedder`` enables embedding-similarity linking.
    """
    if target_mode not in TARGET_MODES:
        raise FactoryError(f"unknown target_mode {target_mode!r}; expected one of {', '.join(TARGET_MODES)}")
    return backtrace_modes(
        trajectory, (mode,), (target_mode,), tokenizer=tokenizer, simple_cutoff=simple_cutoff,
        fuzzy_threshold=fuzzy_threshold, containment=containment, admin_relations=admin_relations,
        gold_answers=gold_answers, embedder=embedder,
    )[0]
