"""The answer's passage: a target for an answer that names no node of G.

An LLM that extracts triplets from a passage often leaves the answer out: "Population ... Total
2,913,123" in the Kansas passage yields triplets about Kansas, but none with the number. The answer
then names no node (not exactly, not by containment, not by any linking tier) and backtracing finds
no path, although the trajectory read the passage that states it. The rule:

- an *answer passage* is a passage that grounds at least one triplet of G (``source_pid``) and whose
  text contains the normalised answer as whole words;
- in each answer passage, the *anchors* are the nodes of the passage's triplets that the sentences
  stating the answer name (``Linker.mentions``); when those sentences name none, every node of the
  passage's triplets;
- the answer becomes a virtual target node per answer passage (``answer@<pid>``), reached from each
  anchor through the triplets of that passage that touch the anchor (each such triplet is an extra
  edge anchor -> answer carrying its own id). A path to the answer therefore ends with a triplet
  of the passage that states it, and S_q keeps that triplet (parallel edges: all the passage's
  triplets at the anchor nearest to the initial entities).

It applies only to an answer that names no node and is not yes/no, and only when the caller gives
the passages' sentences (``passages``: pid -> sentences); without them backtracing is unchanged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from factory.backtrace.graph import Graph
from factory.backtrace.nodes import contains_words, normalize_entity
from factory.backtrace.targets import YES_NO

Passages = Mapping[str, Sequence[str]]  # pid -> sentences


def answer_node(pid: str) -> str:
    """The virtual target node of the answer stated in passage ``pid``."""
    return f"answer@{pid}"


def answer_passage_edges(
    answers: Sequence[str], graph: Graph, source_of: Mapping[str, str | None], passages: Passages
) -> list[tuple[str, str, str]]:
    """Extra edges (triplet id, anchor node, answer node) for every answer passage (module docstring),
    in a stable order; [] when no passage states the answer."""
    keys = sorted({k for k in (normalize_entity(a) for a in answers if a) if k and k not in YES_NO})
    if not keys:
        return []
    by_pid: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for tid, s, o in graph.edges:
        pid = source_of.get(tid)
        if pid is not None and pid in passages:
            by_pid[pid].append((tid, s, o))
    extra: list[tuple[str, str, str]] = []
    for pid in sorted(by_pid):
        stating = [
            sentence
            for sentence in passages[pid] or ()
            if any(contains_words(normalize_entity(sentence), k) for k in keys)
        ]
        if not stating:
            continue
        touched = {n for _, s, o in by_pid[pid] for n in (s, o)}
        named = {n for sentence in stating for n in graph.linker.mentions(sentence)} & touched
        anchors = named or touched
        target = answer_node(pid)
        for tid, s, o in by_pid[pid]:
            for n in sorted({s, o} & anchors):
                extra.append((tid, n, target))
    return extra


def with_answer_passages(
    graph: Graph, answers: Sequence[str], source_of: Mapping[str, str | None], passages: Passages
) -> tuple[Graph, list[str]]:
    """(G plus the answer edges, the answer nodes); (G, []) when no passage states the answer."""
    extra = answer_passage_edges(answers, graph, source_of, passages)
    if not extra:
        return graph, []
    nodes = sorted({target for _, _, target in extra})
    return Graph(
        graph.edges + extra,
        graph.linker,
        graph.admin_dropped,
        graph.admin_dropped_ids,
        graph.links,
        loops=graph.loops,
    ), nodes
