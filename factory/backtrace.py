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
  i-t path iff d(i,u) + 1 + d(v,t) == d(i,t); tested against networkx); ``directed_reach`` — s->o kept iff s is reachable
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
  initial entities plus every entity the agent looked up (all explore pairs). When the answer is
  yes/no, or all its nodes are compared entities ("Which film is newer, A or B?" -> "B"), the answer
  names no evidence; the targets then include the compared entities' attribute values named in the
  final thought: nodes mentioned in the thought that are not in C and are connected to a member of C
  in G ("A came out in 1990, B in 1985" -> 1990, 1985). When the thought names no such value
  ("The answer is B."), the values are the ends of the compared entities' chains: nodes reachable
  from C along the triplets' direction that have no outgoing triplet (film -> director -> date of
  death: the dates). The rule applies in every answer-based target mode (``thought_and_answer``,
  ``answer_only``, ``gold_answer``).
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

import itertools
import re
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from factory.agent.format import render_complete, render_explore
from factory.config import BACKTRACE_MODES, TARGET_MODES, BacktraceParams
from factory.errors import FactoryError
from factory.linking import Embedder, Linker, _merge, node_key, normalize_entity

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

    def many(self, texts: Iterable[str | None]) -> list[int]:
        """Token counts of several texts (the whitespace case without per-call overhead)."""
        if self._count is _whitespace_count:
            return [len(t.split()) if t else 0 for t in texts]
        return [self(t) for t in texts]


def _whitespace_count(text: str) -> int:
    return len(text.split())


# ---------------------------------------------------------------------- validation

_KINDS = frozenset({"explore", "complete", "final"})


def check_trajectory(trajectory: Any) -> str:
    """Full check of the fields backtracing reads; raises BadTrajectory naming the field. Returns the id."""
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
        if step["index"] in indices:
            raise BadTrajectory(tid, f"steps[{n}].index", f"duplicate step index {step['index']}")
        if step.get("kind") not in _KINDS:
            raise BadTrajectory(tid, f"steps[{n}].kind", f"must be explore|complete|final, got {step.get('kind')!r}")
        for m, pair in enumerate(step.get("pairs") or []):
            for key in ("pair_id", "entity", "relation"):
                if not isinstance(pair, dict) or not isinstance(pair.get(key), str):
                    raise BadTrajectory(tid, f"steps[{n}].pairs[{m}].{key}", "missing or not a string")
        for key in ("output", "thought", "answer"):
            if step.get(key) is not None and not isinstance(step[key], str):
                raise BadTrajectory(tid, f"steps[{n}].{key}", "not a string")
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
    for key in ("question", "answer", "final_thought"):
        if trajectory.get(key) is not None and not isinstance(trajectory[key], str):
            raise BadTrajectory(tid, key, "not a string")
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
    _explored: dict[Any, list[str]] = field(default_factory=dict)  # per trajectory id (see explored_entities)

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
    embedding_threshold: float = 0.8,
) -> Graph:
    """G from a trajectory's triplets: rule filter, normalised nodes, linked variants merged."""
    admin = _admin_set(admin_relations if isinstance(admin_relations, tuple) else tuple(admin_relations))
    words, key = _relation_words, node_key
    ok = [admin.isdisjoint(words(t["relation"])) for t in triplets]
    if all(ok):
        dropped: list[str] = []
        kept = triplets
    else:
        dropped = [t["triplet_id"] for t, good in zip(triplets, ok) if not good]
        kept = [t for t, good in zip(triplets, ok) if good]
    keys = [(t["triplet_id"], key(t["subject"]), key(t["object"])) for t in kept]
    unique = sorted({n for _, s, o in keys for n in (s, o)})
    node_of = _merge(unique, containment, ((s, o) for _, s, o in keys))  # pairs read only if a merge is proposed
    edges = [(tid, node_of[s], node_of[o]) for tid, s, o in keys]
    linker = Linker(node_of, containment=containment, fuzzy_threshold=fuzzy_threshold, embedder=embedder,
                    embedding_threshold=embedding_threshold)
    return Graph(edges, linker, len(dropped), dropped)


def link(mention: str, graph: Graph) -> list[str]:
    """Nodes of G a mention refers to (exact, containment, fuzzy, [embedding]); [] if none."""
    return graph.linker.link(mention)


# ---------------------------------------------------------------------- initial and target entities


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def first_explore_step(trajectory: dict) -> dict | None:
    """The explore step with the lowest index (None when there is none)."""
    best = None
    for s in trajectory["steps"]:
        if s["kind"] == "explore" and (best is None or s["index"] < best["index"]):
            best = s
    return best


def final_step(trajectory: dict) -> dict | None:
    """The final answer step: the last ``final`` step, else the last sufficient explore step."""
    final = sufficient = None
    for s in trajectory["steps"]:
        kind = s["kind"]
        if kind == "final":
            if final is None or s["index"] > final["index"]:
                final = s
        elif kind == "explore" and s.get("sufficient") and (sufficient is None or s["index"] > sufficient["index"]):
            sufficient = s
    return final if final is not None else sufficient


def final_text(trajectory: dict) -> tuple[str, str]:
    """(final thought, answer): the trajectory's fields, else the final answer step's."""
    thought, answer = trajectory.get("final_thought"), trajectory.get("answer")
    if not thought or not answer:
        step = final_step(trajectory) or {}
        thought = thought or step.get("thought") or ""
        answer = answer or step.get("answer") or ""
    return thought, answer


def initial_entities(trajectory: dict, graph: Graph) -> list[str]:
    """Nodes linked from the entities of the first explore step's pairs; fallback: nodes named in
    the question. Sorted."""
    first = first_explore_step(trajectory)
    found: set[str] = set()
    if first is not None:
        for pair in first.get("pairs") or ():
            found.update(graph.linker.link(_text(pair["entity"])))
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


def explored_entities(trajectory: dict, graph: Graph) -> list[str]:
    """Nodes linked from the entities of every explore pair (what the agent looked up). Sorted."""
    key = trajectory.get("trajectory_id")
    cached = graph._explored.get(key)
    if cached is not None:
        return cached
    found: set[str] = set()
    for s in trajectory["steps"]:
        if s["kind"] == "explore":
            for pair in s.get("pairs") or ():
                found.update(graph.linker.link(_text(pair["entity"])))
    graph._explored[key] = out = sorted(found)
    return out


def comparison_targets(trajectory: dict, graph: Graph, initial: Sequence[str], thought: str | None = None) -> list[str]:
    """The compared entities' attribute values: the nodes named in the final thought that are not
    compared entities (the initial entities and every entity the agent looked up) and are connected to
    one of them in G; when the thought names none, the values at the end of the compared entities'
    chains (nodes reachable from them along the triplets' direction that have no outgoing triplet)."""
    if thought is None:
        thought = final_text(trajectory)[0]
    compared = set(initial) | set(explored_entities(trajectory, graph))
    connected = _reach(graph.adjacency(), compared)
    named = sorted(n for n in graph.linker.mentions(thought) if n not in compared and n in connected)
    if named:
        return named
    succ: dict[str, set[str]] = defaultdict(set)
    for _, s, o in graph.edges:
        if s != o:
            succ[s].add(o)
    return sorted(n for n in _reach(succ, compared) if n not in compared and not succ.get(n))


def _is_comparison_answer(answer: str, nodes: Sequence[str], compared: set[str]) -> bool:
    return normalize_entity(answer) in YES_NO or (bool(nodes) and set(nodes) <= compared)


def target_entities(
    trajectory: dict,
    graph: Graph,
    target_mode: str = "thought_and_answer",
    *,
    initial: Sequence[str] | None = None,
    gold_answers: Sequence[str] | None = None,
    texts: tuple[str, str] | None = None,
) -> list[str]:
    """Target entities T for a target mode (see the module docstring). Sorted. ``texts``: the
    (final thought, answer) when already known."""
    linker = graph.linker
    if initial is None:
        initial = initial_entities(trajectory, graph)
    thought, answer = final_text(trajectory) if texts is None else texts
    if target_mode == "thought_and_answer":
        nodes = answer_nodes(answer, graph)
        found = set(linker.mentions(thought)) | set(nodes)
        if answer and _is_comparison_answer(answer, nodes, set(initial) | set(explored_entities(trajectory, graph))):
            found.update(comparison_targets(trajectory, graph, initial, thought))
        return sorted(found)
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
    if answers and _is_comparison_answer(answers[0], sorted(found), set(initial) | set(explored_entities(trajectory, graph))):
        found.update(comparison_targets(trajectory, graph, initial, thought))
    return sorted(found)


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
            for a, b in itertools.pairwise(path):
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


class _Accounting:
    """Per-trajectory facts for step labels, computed once and shared by every mode."""

    def __init__(self, trajectory: dict, counter: TokenCounter):
        steps = trajectory["steps"]
        order = [s["index"] for s in steps]
        if order != sorted(order):
            steps = sorted(steps, key=_by_index)
        self.steps = steps
        triplets = trajectory["triplets"]
        # triplet id -> (position in G, step index, pair id)
        self.where = {t["triplet_id"]: (n, t["step_index"], t.get("pair_id")) for n, t in enumerate(triplets)}
        self.triplets = triplets
        indices = set(order)
        # the cross-record conditions that would not raise by themselves; anything else malformed
        # raises while labelling and is then diagnosed by check_trajectory
        if (len(self.where) != len(triplets) or len(indices) != len(steps)
                or not {w[1] for w in self.where.values()} <= indices
                or not {s["kind"] for s in steps} <= _KINDS or not isinstance(trajectory["trajectory_id"], str)):
            check_trajectory(trajectory)
        final = final_step(trajectory)
        self.final_index = final["index"] if final is not None else None
        self.counter = counter
        self.tokens = counter.many([s.get("output") for s in steps])
        self.total = sum(self.tokens)
        self._by_id: dict[str, dict] | None = None

    def order(self, kept: set[str]) -> list[str]:
        """Kept triplet ids in creation order."""
        where = self.where
        return sorted(kept, key=lambda t: where[t][0])

    def triplet(self, tid: str) -> dict:
        if self._by_id is None:
            self._by_id = {t["triplet_id"]: t for t in self.triplets}
        return self._by_id[tid]

    def labels(self, kept: set[str]) -> StepLabels:
        where = self.where
        good_steps = {where[t][1] for t in kept}
        good_pairs = {where[t][2] for t in kept}
        for step in self.steps:  # a complete step answers its pair: its contributive triplets make the pair contributive
            if step["kind"] == "complete" and step["index"] in good_steps and step.get("pair_id"):
                good_pairs.add(step["pair_id"])
        kept_pairs: list[str] = []
        kept_steps: list[int] = []
        filtered = 0
        for step, n in zip(self.steps, self.tokens):
            idx, kind = step["index"], step["kind"]
            if idx == self.final_index:
                kept_steps.append(idx)
            elif kind == "explore":
                pairs = step.get("pairs") or ()
                keep = [p for p in pairs if p["pair_id"] in good_pairs]
                if not keep:
                    filtered += n
                    continue
                kept_steps.append(idx)
                kept_pairs.extend(p["pair_id"] for p in keep)
                if len(keep) < len(pairs):
                    rendered = render_explore(step.get("thought") or "", [(p["entity"], p["relation"]) for p in keep])
                    filtered += max(0, n - self.counter(rendered))
            elif kind == "complete":
                if idx not in good_steps:
                    filtered += n
                    continue
                kept_steps.append(idx)
                own = [t for t in step.get("triplet_ids") or () if t in where]
                keep = [t for t in own if t in kept]
                if len(keep) < len(own):
                    rows = [self.triplet(t) for t in keep]
                    rendered = render_complete([(t["subject"], t["relation"], t["object"]) for t in rows])
                    filtered += max(0, n - self.counter(rendered))
            else:  # a 'final' step that is not the last one: superseded, not the answer
                filtered += n
        return StepLabels(kept_pairs, kept_steps, filtered, self.total)


def _by_index(step: dict) -> int:
    return step["index"]


def step_labels(trajectory: dict, kept: set[str], tokenizer: Any = None) -> StepLabels:
    """Pair/step labels and token accounting for a set of contributive triplet ids."""
    counter = tokenizer if isinstance(tokenizer, TokenCounter) else TokenCounter(tokenizer)
    return _Accounting(trajectory, counter).labels(set(kept))


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
    embedding_threshold: float = 0.8,
) -> list[dict]:
    """Labels rows for every (mode, target mode), sharing the graph, links and token counts."""
    for m in modes:
        if m not in MODES:
            raise FactoryError(f"unknown backtrace mode {m!r}; expected one of {', '.join(MODES)}")
    for m in target_modes:
        if m not in TARGET_MODES:
            raise FactoryError(f"unknown target_mode {m!r}; expected one of {', '.join(TARGET_MODES)}")
    counter = tokenizer if isinstance(tokenizer, TokenCounter) else TokenCounter(tokenizer)
    try:
        return _label(trajectory, modes, target_modes, counter, simple_cutoff, fuzzy_threshold, containment,
                      admin_relations, gold_answers, embedder, embedding_threshold)
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        tid = check_trajectory(trajectory)  # names the bad field; if it finds none, report the raw error
        raise BadTrajectory(tid, "record", f"cannot be backtraced ({type(exc).__name__}: {exc})") from None


def _label(trajectory, modes, target_modes, counter, simple_cutoff, fuzzy_threshold, containment, admin_relations,
           gold_answers, embedder, embedding_threshold) -> list[dict]:
    accounting = _Accounting(trajectory, counter)  # validates the cross-record ids first
    tid = trajectory["trajectory_id"]
    graph = build_graph(
        trajectory["triplets"], admin_relations=admin_relations, containment=containment,
        fuzzy_threshold=fuzzy_threshold, embedder=embedder, embedding_threshold=embedding_threshold,
    )
    initial = initial_entities(trajectory, graph)
    texts = final_text(trajectory)
    question_id = trajectory.get("question_id") or ""
    correct = bool(trajectory.get("correct"))
    rows = []
    for target_mode in target_modes:
        targets = target_entities(trajectory, graph, target_mode, initial=initial, gold_answers=gold_answers, texts=texts)
        for mode in modes:
            kept = supporting_subgraph(graph, initial, targets, mode, simple_cutoff)
            labels = accounting.labels(kept)
            total = labels.total_tokens
            rows.append(
                {
                    "trajectory_id": tid,
                    "question_id": question_id,
                    "mode": mode,
                    "target_mode": target_mode,
                    "correct": correct,
                    "initial_entities": list(initial),
                    "target_entities": list(targets),
                    "kept_triplet_ids": accounting.order(kept),
                    "kept_pair_ids": labels.kept_pair_ids,
                    "kept_step_indices": labels.kept_step_indices,
                    "path_found": bool(kept),
                    "admin_dropped": graph.admin_dropped,
                    "filtered_tokens": labels.filtered_tokens,
                    "total_tokens": total,
                    "fa_ratio": labels.filtered_tokens / total if total else 0.0,
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
    embedding_threshold: float = 0.8,
) -> dict:
    """Backtrace one trajectory: the ``schemas.LABELS`` row for one mode and target mode.

    ``tokenizer``: None (whitespace tokens), an object with ``count_tokens(text)``, a HF tokenizer
    or a ``TokenCounter``; its name is recorded. ``gold_answers`` overrides the trajectory's
    ``answers`` for ``target_mode="gold_answer"``. ``embedder`` (e.g. ``factory.linking.sentence_embedder()``)
    enables embedding-similarity linking at ``embedding_threshold``.
    """
    return backtrace_modes(
        trajectory, (mode,), (target_mode,), tokenizer=tokenizer, simple_cutoff=simple_cutoff,
        fuzzy_threshold=fuzzy_threshold, containment=containment, admin_relations=admin_relations,
        gold_answers=gold_answers, embedder=embedder, embedding_threshold=embedding_threshold,
    )[0]
