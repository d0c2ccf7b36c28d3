"""Versioned prompt templates of the KnowTrace agent: explore, complete, final (forced) and repair.

A trajectory stores the version it was generated with (``agent.prompt_version``); templates of
older versions stay in ``PROMPTS`` unchanged so that any stored trajectory can be re-prompted
exactly. Few-shot outputs are rendered with ``factory.agent.format`` so they always follow the
formats the parser reads and the supervision builder re-renders.

Every prompt is two messages: a system message (instructions + worked examples) and a user
message (this step's inputs). The rationalization hint (STaR) is one extra line in the user
message; the loop records the hint-free variant of every prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

from factory.agent.format import render_complete, render_explore, render_final, render_triplet
from factory.errors import FactoryError

EMPTY_GRAPH = "(empty)"
NO_PASSAGES = "(no passages found)"


@dataclass(frozen=True)
class PromptSet:
    """The templates of one prompt version."""

    version: str
    explore_system: str
    complete_system: str
    final_system: str
    repair_user: str  # .format(error=...)
    hint_line: str  # .format(answer=...)
    stop: tuple[str, ...] = ()  # generation stops here: a small model that starts a new example is cut off


# ---------------------------------------------------------------- knowtrace-v1
# Worked examples written for this project (well-known facts, not taken from any corpus).

_V1_EXPLORE_EXAMPLES = [
    (
        "Which river flows through the capital of Hungary?",
        [],
        render_explore("I need the capital of Hungary first.", [("Hungary", "capital")]),
    ),
    (
        "Which river flows through the capital of Hungary?",
        [("Hungary", "capital", "Budapest")],
        render_explore(
            "The capital is Budapest; now I need the river that flows through it.", [("Budapest", "river")]
        ),
    ),
    (
        "Which river flows through the capital of Hungary?",
        [("Hungary", "capital", "Budapest"), ("Budapest", "river", "Danube")],
        render_explore(
            "Budapest is the capital and the Danube flows through it.", [], sufficient=True, answer="Danube"
        ),
    ),
    (
        "Is the Eiffel Tower taller than the Space Needle?",
        [],
        render_explore(
            "I need the height of both towers.", [("Eiffel Tower", "height"), ("Space Needle", "height")]
        ),
    ),
]

_V1_COMPLETE_EXAMPLES = [
    (
        "Which river flows through the capital of Hungary?",
        ("Budapest", "river"),
        [
            (
                "Budapest",
                (
                    "Budapest is the capital and most populous city of Hungary. The Danube flows through "
                    "the city, "
                    "dividing Buda on its west bank from Pest on its east bank."
                ),
            )
        ],
        render_complete([("Budapest", "river", "Danube")]),
    ),
    (
        "Is the Eiffel Tower taller than the Space Needle?",
        ("Space Needle", "height"),
        [
            (
                "Space Needle",
                (
                    "The Space Needle is an observation tower in Seattle, Washington. It is 184 m high "
                    "and was built "
                    "for the 1962 World's Fair."
                ),
            ),
            ("Seattle Center", "Seattle Center is an arts and entertainment park in Seattle, Washington."),
        ],
        render_complete([("Space Needle", "height", "184 m"), ("Space Needle", "location", "Seattle")]),
    ),
    (
        "Which river flows through the capital of Hungary?",
        ("Hungary", "capital"),
        [
            (
                "Lake Balaton",
                "Lake Balaton is a freshwater lake in western Hungary and the largest lake in "
                "Central Europe.",
            )
        ],
        render_complete([]),
    ),
]

_V1_FINAL_EXAMPLE = (
    "Is the Eiffel Tower taller than the Space Needle?",
    [("Eiffel Tower", "height", "330 m"), ("Space Needle", "height", "184 m")],
    render_final(
        "The Eiffel Tower is 330 m high and the Space Needle 184 m, so the Eiffel Tower is taller.", "yes"
    ),
)


def render_graph(triplets: list[tuple[str, str, str]]) -> str:
    """G as the prompts show it: one triplet per line, '(empty)' when there is none."""
    return "\n".join(render_triplet(*t) for t in triplets) if triplets else EMPTY_GRAPH


def render_passages(passages: list[tuple[str, str]]) -> str:
    """Numbered passages, each 'title: text' (text already cut by the caller)."""
    if not passages:
        return NO_PASSAGES
    return "\n".join(f"[{i}] {title}: {text}" for i, (title, text) in enumerate(passages, start=1))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _explore_user(question: str, graph: list[tuple[str, str, str]]) -> str:
    return f"Question: {_one_line(question)}\nGraph:\n{render_graph(graph)}"


def _complete_user(question: str, entity: str, relation: str, passages: list[tuple[str, str]]) -> str:
    return (
        f"Question: {_one_line(question)}\nLook up: {entity} | {relation}\n"
        f"Passages:\n{render_passages(passages)}"
    )


def _final_user(question: str, graph: list[tuple[str, str, str]]) -> str:
    return f"Question: {_one_line(question)}\nGraph:\n{render_graph(graph)}"


def _examples(pairs: list[tuple[str, str]]) -> str:
    return "\n\n".join(f"Example {i}:\n{inp}\nOutput:\n{out}" for i, (inp, out) in enumerate(pairs, start=1))


_V1_EXPLORE_SYSTEM = (
    "You answer multi-hop questions by building a knowledge graph of (subject ; relation ; object) "
    "triplets.\n"
    "You see the question and the graph built so far. If the graph is not enough to answer, write one short "
    "thought and list what to look up next, one 'entity | relation' pair per line (at most three). If "
    "the graph "
    "is enough, write one short thought and a short answer (a name, a date, a number, or yes/no).\n"
    "Reply in exactly one of these two forms and nothing else:\n\n"
    + render_explore("<one sentence>", [("<entity>", "<relation>")])
    + "\n\nor\n\n"
    + render_explore("<one sentence>", [], sufficient=True, answer="<short answer>")
    + "\n\n"
    + _examples([(_explore_user(q, g), out) for q, g, out in _V1_EXPLORE_EXAMPLES])
)

_V1_COMPLETE_SYSTEM = (
    "You read passages and write down the facts they state about one entity and relation.\n"
    "Write every triplet the passages support for the 'Look up' pair, one per line, in the form "
    "(subject ; relation ; object), using the names as the passages write them. If the passages say nothing "
    "about it, write None.\n\n"
    + _examples([(_complete_user(q, e, r, ps), out) for q, (e, r), ps, out in _V1_COMPLETE_EXAMPLES])
)

_V1_FINAL_SYSTEM = (
    "You answer a multi-hop question from a knowledge graph of (subject ; relation ; object) triplets. "
    "This is the last step: no more lookups are possible. Give your best answer from the graph (and what you "
    "know), even if the graph is incomplete.\n"
    "Reply in exactly this form and nothing else:\n\n"
    + render_final("<one or two sentences>", "<short answer>")
    + "\n\n"
    + _examples([(_final_user(_V1_FINAL_EXAMPLE[0], _V1_FINAL_EXAMPLE[1]), _V1_FINAL_EXAMPLE[2])])
)

PROMPTS: dict[str, PromptSet] = {
    "knowtrace-v1": PromptSet(
        version="knowtrace-v1",
        explore_system=_V1_EXPLORE_SYSTEM,
        complete_system=_V1_COMPLETE_SYSTEM,
        final_system=_V1_FINAL_SYSTEM,
        repair_user="Your reply could not be read: {error}. Reply again in exactly the format shown, "
        "with nothing else.",
        hint_line='Hint: the correct answer is "{answer}". Find the facts that lead to it.',
        stop=("\nQuestion:", "\nExample ", "\nGraph:", "\nPassages:", "\nOutput:"),
    ),
}


def prompt_set(version: str) -> PromptSet:
    """The templates of ``version``; a clear error for an unknown one."""
    try:
        return PROMPTS[version]
    except KeyError:
        raise FactoryError(
            f"agent.prompt_version={version!r} is unknown (known: {', '.join(sorted(PROMPTS))})"
        ) from None


def _messages(system: str, user: str, hint: str | None, hint_line: str) -> list[dict]:
    if hint is not None:
        user = f"{user}\n{hint_line.format(answer=hint)}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def explore_messages(
    version: str, question: str, graph: list[tuple[str, str, str]], hint: str | None = None
) -> list[dict]:
    """Explore prompt: the question and G (``hint``: the gold answer, rationalization only)."""
    p = prompt_set(version)
    return _messages(p.explore_system, _explore_user(question, graph), hint, p.hint_line)


def complete_messages(
    version: str,
    question: str,
    entity: str,
    relation: str,
    passages: list[tuple[str, str]],
    passage_chars: int,
) -> list[dict]:
    """Complete prompt: the pair and the retrieved passages (title, text), text cut to ``passage_chars``."""
    p = prompt_set(version)
    shown = [(title, _cut(text, passage_chars)) for title, text in passages]
    return _messages(p.complete_system, _complete_user(question, entity, relation, shown), None, p.hint_line)


def final_messages(
    version: str, question: str, graph: list[tuple[str, str, str]], hint: str | None = None
) -> list[dict]:
    """Forced final answer from G."""
    p = prompt_set(version)
    return _messages(p.final_system, _final_user(question, graph), hint, p.hint_line)


def repair_messages(version: str, messages: list[dict], bad_output: str, error: str) -> list[dict]:
    """Re-ask: the original prompt, the unreadable reply, and what was wrong with it."""
    p = prompt_set(version)
    return [
        *messages[:2],
        {"role": "assistant", "content": bad_output},
        {"role": "user", "content": p.repair_user.format(error=error)},
    ]


def step_kind(messages: list[dict] | tuple) -> str | None:
    """'explore' | 'complete' | 'final' for a prompt made by any version here (None if unknown)."""
    first = messages[0]
    role, content = (first["role"], first["content"]) if isinstance(first, dict) else first
    if role != "system":
        return None
    for p in PROMPTS.values():
        for kind, system in (
            ("explore", p.explore_system),
            ("complete", p.complete_system),
            ("final", p.final_system),
        ):
            if content == system:
                return kind
    return None


def _cut(text: str, limit: int) -> str:
    """Cut at a word boundary and mark the cut, so the model does not read a truncated word as a fact."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip() + " ..."
