"""Initial and target entities of a trajectory (see ``factory.backtrace.labels`` for the rules)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from factory.backtrace.graph import Graph
from factory.backtrace.nodes import is_specific, node_key, normalize_entity
from factory.backtrace.question import question_entities
from factory.params.label_sections import BacktraceParams
from factory.params.vocab import TARGET_MODES
from factory.utils.errors import FactoryError

YES_NO = frozenset({"yes", "no"})


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
        elif (
            kind == "explore"
            and s.get("sufficient")
            and (sufficient is None or s["index"] > sufficient["index"])
        ):
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


def initial_entities(trajectory: dict, graph: Graph, params: BacktraceParams | None = None) -> list[str]:
    """Nodes linked from the entities of the first explore step's pairs; fallback: the question's
    entities (``factory.backtrace.question``; without ``params.question_case``: every node name found in
    the question, letter case ignored). Sorted. ``params``: None = the defaults of
    ``factory.params.label_sections.BacktraceParams``."""
    question_case = (params or BacktraceParams()).question_case
    first = first_explore_step(trajectory)
    found: set[str] = set()
    if first is not None:
        for pair in first.get("pairs") or ():
            found.update(graph.linker.link(_text(pair["entity"])))
    if not found:
        question = trajectory.get("question") or ""
        found.update(
            question_entities(question, graph.linker) if question_case else graph.linker.mentions(question)
        )
    return sorted(found)


def answer_nodes(answer: str, graph: Graph) -> list[str]:
    """Nodes an answer names. The node of that very name when there is one (the answer is that node:
    "rocky mountains", not also "northern rocky mountains"); else the nodes mentioned in it plus the
    nodes containing it as whole words ("1988" -> "1988 summer olympics in seoul"; only for an answer
    that is specific or holds a digit: "us" or "no" is inside too many names to say which); when
    that finds nothing, the answer linked as a mention. Yes/no answers name no node."""
    key = node_key(answer or "")
    if not answer or normalize_entity(answer) in YES_NO:
        return []
    node = graph.linker.node_of.get(key)
    if node is not None:
        return [node]
    mentioned, containing = graph.linker.mentioned_and_containing(answer)
    if not (is_specific(key) or any(c.isdigit() for c in key)):
        containing = set()
    found = containing.union(mentioned)
    if not found:
        found.update(graph.linker.link(answer))
    return sorted(found)


def answers_nodes(answers: Sequence[str], graph: Graph) -> list[str]:
    """Nodes of several answers (a gold answer and its aliases): the nodes named exactly by any of them
    when there are such, else every answer's ``answer_nodes``."""
    exact = {
        graph.linker.node_of.get(node_key(a)) for a in answers if a and normalize_entity(a) not in YES_NO
    }
    exact.discard(None)
    if exact:
        return sorted(exact)
    found: set[str] = set()
    for a in answers:
        found.update(answer_nodes(a, graph))
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


def compared_entities(trajectory: dict, graph: Graph, initial: Sequence[str]) -> set[str]:
    """The entities a comparison or yes/no question compares: the question's entities
    (``factory.backtrace.question``) that the agent looked up ("Who was born first, A or B?"; not
    "Spain" in "Are A and B both in Spain?", which is a value, and not a distractor looked up beside A
    and B); when it looked up none of them, the initial entities. Always among the initial entities
    and the lookups."""
    named = set(question_entities(trajectory.get("question") or "", graph.linker))
    return (named & set(explored_entities(trajectory, graph))) or set(initial)


def compared_chains(trajectory: dict, graph: Graph, compared: set[str]) -> tuple[set[str], set[str]]:
    """(the values on the compared entities' chains, the chains' ends), read off the agent's own
    lookups in step order: a lookup of a compared entity returns that entity's facts (the triplets of
    its completion that touch it; a fact may be written either way: "(1990 ; release year of ; A)"),
    and their other nodes are values; a lookup in a later step of a value found before (film -> its
    director) continues the chain with the director's facts. The ends are the values the agent did
    not look up (what it looked up is an entity, not a value). A lookup of anything else (a
    distractor, also one asked beside the compared entities) is no chain. A trajectory without lookups
    (a bare graph) has the compared entities' neighbours in G as values and ends."""
    node_pairs = {tid: (s, o) for tid, s, o in graph.edges}
    by_pair: dict[str, list[str]] = {}
    for t in trajectory.get("triplets") or ():
        if t.get("pair_id") is not None and t["triplet_id"] in node_pairs:
            by_pair.setdefault(t["pair_id"], []).append(t["triplet_id"])
    explores = sorted((s for s in trajectory["steps"] if s["kind"] == "explore"), key=lambda s: s["index"])
    if not any(s.get("pairs") for s in explores):
        adjacency = graph.adjacency()
        values = {v for c in compared for v in adjacency.get(c, ())} - compared
        return values, values
    values: set[str] = set()
    for step in explores:
        found: set[str] = set()
        for pair in step.get("pairs") or ():
            nodes = set(graph.linker.link(_text(pair["entity"])))
            if not nodes & (compared | values):
                continue
            for tid in by_pair.get(pair["pair_id"], ()):
                ends = set(node_pairs[tid])
                if ends & nodes:  # a fact about the entity looked up, not a passer-by of its completion
                    found |= ends
        values |= found - compared
    return values, values - set(explored_entities(trajectory, graph))


def comparison_targets(
    trajectory: dict, graph: Graph, initial: Sequence[str], thought: str | None = None
) -> list[str]:
    """The compared entities' values (``compared_entities``, ``compared_chains``): the chains' ends that
    the final thought names; when it names none, every end. Other chains (a distractor the agent looked
    up, a node merely connected somewhere in G) hold no values."""
    if thought is None:
        thought = final_text(trajectory)[0]
    _, ends = compared_chains(trajectory, graph, compared_entities(trajectory, graph, initial))
    named = sorted(n for n in graph.linker.mentions(thought) if n in ends)
    return named or sorted(ends)


def _is_comparison_answer(
    answer: str, nodes: Sequence[str], trajectory: dict, graph: Graph, initial: Sequence[str]
) -> bool:
    if normalize_entity(answer) in YES_NO:
        return True
    if not nodes or not set(nodes) <= set(initial).union(explored_entities(trajectory, graph)):
        return False  # cheap first: compared entities are among these (``compared_entities``)
    return set(nodes) <= compared_entities(trajectory, graph, initial)


def target_entities(
    trajectory: dict,
    graph: Graph,
    target_mode: str,
    *,
    initial: Sequence[str],
    gold_answers: Sequence[str] | None = None,
    texts: tuple[str, str] | None = None,
) -> list[str]:
    """Target entities T for a target mode (one of ``TARGET_MODES``; see ``factory.backtrace.labels``)
    given the initial entities (``initial_entities``). Sorted. ``texts``: the (final thought, answer)
    when already known."""
    linker = graph.linker
    thought, answer = final_text(trajectory) if texts is None else texts
    if target_mode == "thought_and_answer":
        nodes = answer_nodes(answer, graph)
        found = set(linker.mentions(thought)) | set(nodes)
        if answer and _is_comparison_answer(answer, nodes, trajectory, graph, initial):
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
    found = set(answers_nodes(answers, graph))
    if answers and _is_comparison_answer(answers[0], sorted(found), trajectory, graph, initial):
        found.update(comparison_targets(trajectory, graph, initial, thought))
    return sorted(found)
