"""The output formats of the agent's three kinds of step: render (canonical) and parse (tolerant).

These formats are the contract between the agent (which parses model outputs), the supervision
variants (which re-render kept outputs) and the TRACE export. They are kept plain so that a
135M-parameter model can follow them:

explore (not sufficient)::

    Thought: I need the nationality of both directors.
    Sufficient: no
    Look up:
    - Scott Derrickson | nationality
    - Ed Wood | nationality

explore (sufficient) and final::

    Thought: Both are American.
    Sufficient: yes
    Answer: yes

complete (one triplet per line, or ``None``)::

    (Scott Derrickson ; nationality ; American)

Parsing accepts format variants, not prose: any case, bullets ``-``/``*``/``•``/``1.``/``1)``, pair
separators ``|``, ``:``, ``;``, ``->``, triplets with or without parentheses separated by ``;`` or ``|``
(``,`` only inside parentheses or on a bulleted line), and ``None``/``nothing found`` for empty
results. Pairs are read only under ``Look up:`` or from bulleted lines; a relation that reads
as conversation or as a sentence ("I'll keep that in mind for future responses.") is refused.
A parse failure raises ``ParseError`` with a reason the repair prompt shows the model.

A triplet is a triplet (``factory.agent.fields.triplet_problem``, the same rules for every syntax).
A line starting with a bracket must close it at its end, and a line with more than three fields holds
more than one triplet. Such a line is an error of that line, never a node (``Triplets.rejected``). One
repair: a line of several bracketed triplets side by side ("(A ; r ; B) (C ; s ; D)") is read as those
triplets.

``TEXT`` bundles this syntax's renderer, parser and grammar (``factory.agent.grammar``) per step
kind; ``factory.agent.format_json`` is the JSON syntax with the same interface, and
``factory.agent.prompts.output_format`` picks the one a prompt version uses. The length bounds of
``factory.agent.fields`` are part of the definition: the grammar enforces them, so a constrained model
stops a field in time instead of running into the token budget.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from factory.agent.fields import (
    _CLOSING,
    _OPENING,
    _TRIPLE_SEPS,
    ANSWER_CHARS,
    ENTITY_CHARS,
    MAX_TRIPLETS,
    NAME_EXCLUDE,
    PART_CHARS,
    QUALIFIER_CHARS,
    RELATION_CHARS,
    RELATION_EXCLUDE,
    THOUGHT_CHARS,
    ExploreOutput,
    FinalOutput,
    ParseError,
    StepFormat,
    Triplets,
    _check_part,
    check_triplet,
)

_BULLET = re.compile(r"^\s*(?:[-*•·+]|\d{1,2}[.)]|\(\d{1,2}\))\s*")
_KEY = re.compile(
    r"^\s*[*_#>]*\s*(thought|reasoning|sufficient|enough|answer|final answer|look "
    r"?ups?|queries|pairs|entities|triplets?)\s*[*_]*\s*[:：-]\s*[*_]*\s*(.*)$",
    re.I,
)
# "The answer is: X" / "So the final answer is X": small models often answer in prose
_ANSWER_IS = re.compile(
    r"^\s*(?:so,?\s+)?(?:the\s+)?(?:final\s+|short\s+)?answer\s+is\s*[:：]?\s*(.*?)\s*\.?$", re.I
)
_NONE = re.compile(
    r"^\W*(none|nothing( found)?|no (relevant )?(triplets?|information|facts?)( found)?|n/?a|empty)\W*$", re.I
)
_PAIR_SEPS = ("|", "->", "=>", ";", ":", "\t")
_YES = {"yes", "y", "true", "sufficient", "enough"}
_NO = {"no", "n", "false", "insufficient", "not sufficient", "not enough"}


def _clean(text: str) -> str:
    return " ".join(text.strip().strip("\"'`").split())


def _strip_bullet(line: str) -> str:
    return _BULLET.sub("", line, count=1).strip()


def is_none(text: str) -> bool:
    return bool(_NONE.match(text.strip()))


# ---------------------------------------------------------------- render (canonical)


def render_pair(entity: str, relation: str) -> str:
    return f"{entity} | {relation}"


def render_triplet(subject: str, relation: str, obj: str) -> str:
    return f"({subject} ; {relation} ; {obj})"


def render_explore(
    thought: str, pairs: list[tuple[str, str]], sufficient: bool = False, answer: str | None = None
) -> str:
    if sufficient:
        return f"Thought: {thought}\nSufficient: yes\nAnswer: {answer or ''}"
    lines = [f"Thought: {thought}", "Sufficient: no", "Look up:"]
    lines += [f"- {render_pair(e, r)}" for e, r in pairs]
    return "\n".join(lines)


def render_complete(triplets: list[tuple[str, str, str]]) -> str:
    return "\n".join(render_triplet(*t) for t in triplets) if triplets else "None"


def render_final(thought: str, answer: str) -> str:
    return f"Thought: {thought}\nAnswer: {answer}"


# ---------------------------------------------------------------- parse (tolerant)
@dataclass
class _Line:
    text: str
    listed: bool  # under 'Look up:' or a bulleted line: where a pair may be written


def _sections(text: str) -> tuple[dict[str, str], list[_Line]]:
    """Keyed fields (first occurrence wins) and the lines that follow no key or a list key."""
    keys: dict[str, str] = {}
    loose: list[_Line] = []
    current = None
    for raw in text.replace("\r", "").split("\n"):
        line = raw.strip()
        if not line:
            continue
        if current == "answer" and not keys.get("answer"):
            keys["answer"] = line.rstrip(".")  # "The answer is:" followed by the answer on the next line
            continue
        prose = _ANSWER_IS.match(line)
        if prose and "answer" not in keys:
            keys["answer"] = prose.group(1).strip()
            current = "answer"
            continue
        m = _KEY.match(line)
        if m:
            name = m.group(1).lower()
            name = {
                "reasoning": "thought",
                "enough": "sufficient",
                "final answer": "answer",
                "lookup": "look up",
                "lookups": "look up",
                "look ups": "look up",
                "queries": "look up",
                "pairs": "look up",
                "entities": "look up",
            }.get(name, name)
            current = name
            keys.setdefault(name, m.group(2).strip())
            if name == "look up" and m.group(2).strip():
                loose.append(_Line(m.group(2).strip(), True))
            continue
        bullet = bool(_BULLET.match(raw))
        if current == "thought" and not bullet and "look up" not in keys:
            keys["thought"] = (keys["thought"] + " " + line).strip()
            continue
        loose.append(_Line(line, current == "look up" or bullet))
    return keys, loose


def parse_pair(line: str) -> tuple[str, str]:
    """``entity | relation`` (or ``:``, ``;``, ``->``); a comma is not a separator: prose has commas."""
    body = _strip_bullet(line).strip("()[]{} ")
    for sep in _PAIR_SEPS:
        if sep in body:
            entity, relation = body.split(sep, 1)
            entity, relation = _clean(entity), _clean(relation)
            if entity and relation:
                _check_part(entity, line, "an entity")
                _check_part(relation, line, "a relation")
                return entity, relation
    raise ParseError(f"cannot read an 'entity | relation' pair from {line.strip()!r}")


def _closing(text: str, start: int) -> int | None:
    """Index of the bracket that closes the one at ``start`` (None when it never closes)."""
    opening = text[start]
    if opening == "<":
        end = text.rfind(">")
        return end if end > start else None
    depth: list[str] = []
    for i in range(start, len(text)):
        ch = text[i]
        if ch in _OPENING:
            depth.append(_CLOSING[_OPENING.index(ch)])
        elif ch in _CLOSING:
            if not depth or depth.pop() != ch:
                return None
            if not depth:
                return i
    return None


def bracketed_groups(line: str) -> list[str] | None:
    """The triplets of a line holding several bracketed ones side by side ('(A ; r ; B) (C ; s ; D)',
    separated by nothing but spaces, commas or semicolons); None for any other line."""
    body = _strip_bullet(line).strip()
    groups, at = [], 0
    while at < len(body):
        if body[at] in " ,;":
            at += 1
            continue
        if body[at] not in "([{":
            return None
        end = _closing(body, at)
        if end is None:
            return None
        groups.append(body[at : end + 1])
        at = end + 1
    return groups if len(groups) > 1 else None


def parse_triplet(line: str) -> tuple[str, str, str]:
    bulleted = bool(_BULLET.match(line))
    body = _strip_bullet(line).strip()
    bracketed = body[:1] in "([{<"
    if bracketed:
        body = re.sub(r"(?<=[\])>}])\s*[.,;]$", "", body)
        end = _closing(body, 0)
        if end != len(body) - 1:
            raise ParseError(
                f"{line.strip()!r} is not one triplet: its opening bracket does not close at the end of the "
                "line; write one '(subject ; relation ; object)' per line"
            )
        body = body[1:-1].strip()
    parts: list[str] = []
    for sep in _TRIPLE_SEPS:
        split = [_clean(p) for p in body.split(sep)]
        if len(split) > 3 and all(split):
            raise ParseError(
                f"{line.strip()!r} holds more than one triplet ({len(split)} fields); write one "
                "'(subject ; relation ; object)' per line"
            )
        if len(split) == 3 and all(split):
            parts = split
            break
    if not parts and (bracketed or bulleted):  # '(A, r, B)' or '1. A, r, B'; a bare comma list is prose
        split = [_clean(p) for p in body.split(",")]
        if len(split) == 3 and all(split):
            parts = split
    if not parts:
        raise ParseError(f"cannot read a '(subject ; relation ; object)' triplet from {line.strip()!r}")
    check_triplet(parts[0], parts[1], parts[2], line)
    return parts[0], parts[1], parts[2]


def _yes_no(value: str) -> bool | None:
    v = _clean(value).lower().rstrip(".!")
    if v in _YES or v.startswith("yes"):
        return True
    if v in _NO or v.startswith("no"):
        return False
    return None


def parse_explore(text: str, max_pairs: int | None = None) -> ExploreOutput:
    if not text or not text.strip():
        raise ParseError("the output is empty")
    keys, loose = _sections(text)
    thought = _clean(keys.get("thought", ""))
    sufficient = _yes_no(keys["sufficient"]) if "sufficient" in keys else None
    answer = _clean(keys["answer"]) if keys.get("answer") else None
    if sufficient is None:
        sufficient = answer is not None and "look up" not in keys
    if sufficient:
        if not answer:
            raise ParseError("'Sufficient: yes' needs an 'Answer:' line")
        return ExploreOutput(thought=thought, sufficient=True, answer=answer)
    pairs, errors = [], []
    for line in loose:
        if is_none(line.text):
            continue
        if not line.listed:
            errors.append(
                f"cannot read an 'entity | relation' pair from {line.text!r}: pairs go under 'Look up:', "
                "one '- entity | relation' per line"
            )
            continue
        try:
            pair = parse_pair(line.text)
        except ParseError as exc:
            errors.append(str(exc))
            continue
        if pair not in pairs:
            pairs.append(pair)
    if not pairs:
        reason = errors[0] if errors else "no 'entity | relation' pairs after 'Look up:'"
        raise ParseError(reason)
    return ExploreOutput(thought=thought, sufficient=False, pairs=pairs[:max_pairs] if max_pairs else pairs)


def parse_complete(text: str) -> Triplets:
    """All valid triplets, de-duplicated in order; [] for 'None'. Unreadable lines are skipped (and
    listed in ``rejected`` with their reasons) when at least one triplet was read; an output with no
    triplet and no 'None' is an error."""
    if not text or not text.strip():
        raise ParseError("the output is empty")
    candidates, saw_none = [], False
    for raw in text.replace("\r", "").split("\n"):
        line = raw.strip()
        if not line:
            continue
        m = _KEY.match(line)
        if m:
            line = m.group(2).strip()
            if not line:
                continue
        if is_none(line):
            saw_none = True
            continue
        candidates += bracketed_groups(line) or [line]
    triplets = Triplets.read(candidates, parse_triplet)
    if not triplets and not saw_none:
        raise ParseError(triplets.rejected[0] if triplets.rejected else "no triplet and no 'None'")
    return triplets


def parse_final(text: str) -> FinalOutput:
    if not text or not text.strip():
        raise ParseError("the output is empty")
    keys, loose = _sections(text)
    answer = _clean(keys.get("answer", ""))
    if not answer:
        raise ParseError("no 'Answer:' line")
    return FinalOutput(thought=_clean(keys.get("thought", "")), answer=answer)


class TextFormat(StepFormat, functions=globals()):
    """knowtrace-v1's text syntax: renderer, parser and grammar of each step kind."""

    syntax = "text"

    def grammar(self, kind: str, max_pairs: int):
        """The step's outputs as a grammar tree: the canonical rendering with bounded fields."""
        from factory.agent import grammar as g

        thought = g.seq("Thought: ", g.text_field(THOUGHT_CHARS))
        answer = g.text_field(ANSWER_CHARS)
        if kind == "explore":
            pair = g.seq("\n- ", g.text_field(ENTITY_CHARS, "|"), " | ", g.text_field(RELATION_CHARS, "|"))
            return g.seq(
                thought,
                "\n",
                g.alt(
                    g.seq("Sufficient: yes\nAnswer: ", answer),
                    g.seq("Sufficient: no\nLook up:", g.Rep(pair, 1, max_pairs)),
                ),
            )
        if kind == "complete":
            part = g.name_field(PART_CHARS, NAME_EXCLUDE, QUALIFIER_CHARS)
            rel = g.text_field(RELATION_CHARS, RELATION_EXCLUDE)
            triplet = g.seq("(", part, " ; ", rel, " ; ", part, ")")
            return g.alt("None", g.seq(triplet, g.Rep(g.seq("\n", triplet), 0, MAX_TRIPLETS - 1)))
        if kind == "final":
            return g.seq(thought, "\nAnswer: ", answer)
        raise ValueError(f"unknown step kind {kind!r}")

    def json_schema(self, kind: str, max_pairs: int) -> dict | None:
        """None: a text syntax has no JSON schema (servers get its grammar instead)."""
        return None


TEXT = TextFormat()
