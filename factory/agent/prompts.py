"""Versioned prompt templates of the KnowTrace agent: explore, complete, final (forced) and repair.

A trajectory stores the version it was generated with (``agent.prompt_version``); templates of
older versions stay in ``PROMPTS`` unchanged so that any stored trajectory can be re-prompted
exactly. Few-shot outputs are rendered with ``factory.agent.format`` so they always follow the
formats the parser reads and the supervision builder re-renders.

A version also fixes the syntax of the replies it asks for (``PromptSet.syntax``: ``text`` for
``knowtrace-v1``, ``json`` for ``knowtrace-json-v1``); ``output_format(version)`` is the one place that
maps a version to its renderer, parser and grammar, for the agent and for everything that
re-renders a stored step (backtrace token accounting, supervision sets).

Every prompt is two messages: a system message (instructions + worked examples) and a user
message (this step's inputs). The rationalization hint (STaR) is one extra line in the user
message; the loop records the hint-free variant of every prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

from factory.agent import format_json
from factory.agent.format import TEXT, render_complete, render_explore, render_final, render_triplet
from factory.utils.errors import FactoryError

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
    syntax: str = "text"  # of the replies: 'text' (factory.agent.format) or 'json' (format_json)


# ---------------------------------------------------------------- knowtrace-v1
# Worked examples written for this project (well-known facts, not taken from any corpus).

# What the example replies say, rendered by each version in its own syntax.
_V1_EXPLORE_CONTENT = [  # (thought, pairs, sufficient, answer)
    ("I need the capital of Hungary first.", [("Hungary", "capital")], False, None),
    (
        "The capital is Budapest; now I need the river that flows through it.",
        [("Budapest", "river")],
        False,
        None,
    ),
    ("Budapest is the capital and the Danube flows through it.", [], True, "Danube"),
    (
        "I need the height of both towers.",
        [("Eiffel Tower", "height"), ("Space Needle", "height")],
        False,
        None,
    ),
]
_V1_COMPLETE_CONTENT = [
    [("Budapest", "river", "Danube")],
    [("Space Needle", "height", "184 m"), ("Space Needle", "location", "Seattle")],
    [],
]
_V1_FINAL_CONTENT = (
    "The Eiffel Tower is 330 m high and the Space Needle 184 m, so the Eiffel Tower is taller.",
    "yes",
)

_V1_EXPLORE_EXAMPLES = [
    (question, graph, render_explore(*content))
    for (question, graph), content in zip(
        [
            ("Which river flows through the capital of Hungary?", []),
            ("Which river flows through the capital of Hungary?", [("Hungary", "capital", "Budapest")]),
            (
                "Which river flows through the capital of Hungary?",
                [("Hungary", "capital", "Budapest"), ("Budapest", "river", "Danube")],
            ),
            ("Is the Eiffel Tower taller than the Space Needle?", []),
        ],
        _V1_EXPLORE_CONTENT,
    )
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
        render_complete(_V1_COMPLETE_CONTENT[0]),
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
        render_complete(_V1_COMPLETE_CONTENT[1]),
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
        render_complete(_V1_COMPLETE_CONTENT[2]),
    ),
]

_V1_FINAL_EXAMPLE = (
    "Is the Eiffel Tower taller than the Space Needle?",
    [("Eiffel Tower", "height", "330 m"), ("Space Needle", "height", "184 m")],
    render_final(*_V1_FINAL_CONTENT),
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

# ---------------------------------------------------------------- knowtrace-json-v1
# The same task, examples and user messages as knowtrace-v1; the replies are JSON objects, which a
# server can constrain with a JSON schema (response_format) as well as with a grammar.

_J = format_json
_JSON_EXPLORE_SYSTEM = (
    "You answer multi-hop questions by building a knowledge graph of (subject ; relation ; object) "
    "triplets.\n"
    "You see the question and the graph built so far. If the graph is not enough to answer, write one short "
    "thought and list what to look up next as entity-relation pairs (at most three). If the graph is "
    "enough, write one short thought and a short answer (a name, a date, a number, or yes/no).\n"
    "Reply with one JSON object in exactly one of these two forms and nothing else:\n\n"
    + _J.render_explore("<one sentence>", [("<entity>", "<relation>")])
    + "\n\nor\n\n"
    + _J.render_explore("<one sentence>", [], sufficient=True, answer="<short answer>")
    + "\n\n"
    + _examples(
        [
            (_explore_user(q, g), _J.render_explore(*_V1_EXPLORE_CONTENT[i]))
            for i, (q, g, _) in enumerate(_V1_EXPLORE_EXAMPLES)
        ]
    )
)

_JSON_COMPLETE_SYSTEM = (
    "You read passages and write down the facts they state about one entity and relation.\n"
    "Write every triplet the passages support for the 'Look up' pair as one JSON object with a "
    "'triplets' list, using the names as the passages write them. If the passages say nothing about it, "
    "the list is empty.\n\n"
    + _examples(
        [
            (_complete_user(q, e, r, ps), _J.render_complete(_V1_COMPLETE_CONTENT[i]))
            for i, (q, (e, r), ps, _) in enumerate(_V1_COMPLETE_EXAMPLES)
        ]
    )
)

_JSON_FINAL_SYSTEM = (
    "You answer a multi-hop question from a knowledge graph of (subject ; relation ; object) triplets. "
    "This is the last step: no more lookups are possible. Give your best answer from the graph (and what you "
    "know), even if the graph is incomplete.\n"
    "Reply with one JSON object in exactly this form and nothing else:\n\n"
    + _J.render_final("<one or two sentences>", "<short answer>")
    + "\n\n"
    + _examples(
        [(_final_user(_V1_FINAL_EXAMPLE[0], _V1_FINAL_EXAMPLE[1]), _J.render_final(*_V1_FINAL_CONTENT))]
    )
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
    "knowtrace-json-v1": PromptSet(
        version="knowtrace-json-v1",
        explore_system=_JSON_EXPLORE_SYSTEM,
        complete_system=_JSON_COMPLETE_SYSTEM,
        final_system=_JSON_FINAL_SYSTEM,
        repair_user="Your reply could not be read: {error}. Reply again with one JSON object in exactly the "
        "form shown, with nothing else.",
        hint_line='Hint: the correct answer is "{answer}". Find the facts that lead to it.',
        stop=("\nQuestion:", "\nExample ", "\nGraph:", "\nPassages:", "\nOutput:"),
        syntax="json",
    ),
}

# Versions recorded by generators that write a registered syntax without these prompts.
_SYNTAX_WITHOUT_PROMPTS = {"simulated-v1": "text"}  # factory.simulate: knowtrace-v1's text formats
_FORMATS = {"text": TEXT, "json": format_json.JSON}
LEGACY_VERSION = "knowtrace-v1"  # what a record without a prompt_version was generated with


def output_format(version: str | None):
    """The renderer, parser and grammar of the replies ``version`` asks for (``factory.agent.format.TEXT``
    or ``factory.agent.format_json.JSON``): the one dispatch for everything that renders or reads a
    step's output. ``None`` (a record without the field) is ``knowtrace-v1``."""
    version = version or LEGACY_VERSION
    syntax = PROMPTS[version].syntax if version in PROMPTS else _SYNTAX_WITHOUT_PROMPTS.get(version)
    if syntax is None:
        raise FactoryError(
            f"prompt_version {version!r} is unknown, so its output format is too "
            f"(known: {', '.join(sorted([*PROMPTS, *_SYNTAX_WITHOUT_PROMPTS]))})"
        )
    return _FORMATS[syntax]


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
    found = version_and_kind(messages)
    return found[1] if found else None


def version_and_kind(messages: list[dict] | tuple) -> tuple[str, str] | None:
    """(prompt version, step kind) of a prompt made by any version here (None if unknown)."""
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
                return p.version, kind
    return None


def _cut(text: str, limit: int) -> str:
    """Cut at a word boundary and mark the cut, so the model does not read a truncated word as a fact."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip() + " ..."
