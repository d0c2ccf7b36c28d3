"""Initial and target entities of a trajectory (see ``factory.backtrace.labels`` for the rules)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from factory.backtrace.graph import Graph, _reach
from factory.backtrace.linking import is_specific, node_key, normalize_entity
from factory.backtrace.question import question_entities
from factory.config import TARGET_MODES
from factory.errors import FactoryError

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


def initial_entities(trajectory: dict, graph: Graph, *, question_case: bool = True) -> list[str]:
    """Nodes linked from the entities of the first explore step's pairs; fallback: the question's
    entities (``factory.backtrace.question``; ``question_case=False``: every node name found in the
    question, letter case ignored). Sorted."""
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


def comparison_targets(
    trajectory: dict, graph: Graph, initial: Sequence[str], thought: str | None = None
) -> list[str]:
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
        if answer and _is_comparison_answer(
            answer, nodes, set(initial) | set(explored_entities(trajectory, graph))
        ):
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
    if answers and _is_comparison_answer(
        answers[0], sorted(found), set(initial) | set(explored_entities(trajectory, graph))
    ):
        found.update(comparison_targets(trajectory, graph, initial, thought))
    return sorted(found)
