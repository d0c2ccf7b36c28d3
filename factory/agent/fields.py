"""What a step's reply may hold, whatever its syntax (``factory.agent.format`` for text,
``factory.agent.format_json`` for JSON): the parsed outputs, ``ParseError``, the rules of a triplet's
fields and the field bounds the grammars enforce, and ``StepFormat``, the interface of a syntax.

A triplet is a triplet (``triplet_problem``, the same rules for every syntax): each field is a name or
a short phrase — brackets balanced, at most ``TRIPLET_NAME_WORDS`` words / ``TRIPLET_NAME_CHARS``
characters for a subject or object and ``TRIPLET_RELATION_WORDS`` / ``TRIPLET_RELATION_CHARS`` for a
relation, no sentence running on inside it (a sentence end or a question mark followed by more words,
an apposition followed by a verb: "X, Y, is not Z"), no triplet separator inside it (a second triplet
run into it). Such a line is an error of that line, never a node: the other lines of the completion
are kept, and the rejected lines come back with their reasons (``Triplets.rejected``) for the step's
record.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any


class ParseError(ValueError):
    """The output does not follow the step's format; the message says what is wrong."""


@dataclass
class ExploreOutput:
    thought: str
    sufficient: bool
    pairs: list[tuple[str, str]] = field(default_factory=list)  # (entity, relation)
    answer: str | None = None


@dataclass
class FinalOutput:
    thought: str
    answer: str


_TRIPLE_SEPS = (";", "|", "\t")


# A relation is a short noun phrase ("nationality", "born in"); a conversation's words or a whole
# sentence in its place mean the "pair" is prose ("You're right | I'll keep that in mind ...").
# Conversation is a contraction or a politeness word anywhere, or a relation that opens with a
# personal pronoun; a pronoun inside a title is data ("who plays barney from how i met your mother").
# Entities and objects are names, which may be anything ("I Am Legend", "Sorry (song)"): only
# their length is checked.
_CONVERSATION = re.compile(
    r"\b(?:i'm|i'll|i've|i'd|you're|you'll|you've|you'd|we're|we'll|let's|let me|sorry"
    r"|apologi[sz]e|thank you|thanks|please)\b"
    r"|^\s*(?:i|me|my|you|your|we|our)\b",
    re.I,
)
_MAX_RELATION_WORDS = 25  # a pair's relation may be a whole sub-question ("who played the girl in ...")
_MAX_NAME_WORDS = 25
# A triplet's fields: a name or a short phrase. Bounds from real LLM triplets (the shared OpenIE graphs:
# 99% of subjects <= 7 words, relations <= 6, objects <= 10) with room for long titles.
TRIPLET_NAME_WORDS, TRIPLET_NAME_CHARS = 16, 120
TRIPLET_RELATION_WORDS, TRIPLET_RELATION_CHARS = 12, 80
_OPENING, _CLOSING = "([{", ")]}"
# a period after these ends no sentence ("St. Louis", "Dr. Strangelove", "Vol. 2", "No. 5")
_ABBREVIATIONS = frozenset(
    """mr mrs ms dr st jr sr co inc ltd corp bros mt ft gen col lt capt sgt rev prof no vs etc ave blvd
    rd vol op pt sen rep gov pres univ dept est fig jan feb mar apr jun jul aug sep sept oct nov
    dec""".split()
)
_RUN_ON = re.compile(r"(\S+?)([.?])\s+(?=\S)")
# an apposition followed by a verb: "Henry Grey, 4th Earl of Kent's father, is not a 25"
_CLAUSE = re.compile(
    r",\s*(?:is|was|are|were|has|had|have|does|did|do|will|would|can|could|should|may|might)\b", re.I
)


def _check_part(part: str, line: str, what: str) -> None:
    """Refuse prose posing as a field of a pair or a triplet (``what``: 'an entity' | 'a relation' |
    'a name')."""
    plain = part.replace("’", "'")
    words = len(plain.split())
    if what == "a relation":
        sentence = words >= 4 and plain.rstrip().endswith((".", "!"))
        bad = words > _MAX_RELATION_WORDS or sentence or bool(_CONVERSATION.search(plain))
    else:
        bad = words > _MAX_NAME_WORDS
    if bad:
        raise ParseError(f"{line.strip()!r} reads as prose, not as {what}")


def balanced(text: str) -> bool:
    """Round, square and curly brackets open and close in order."""
    stack: list[str] = []
    for ch in text:
        if ch in _OPENING:
            stack.append(_CLOSING[_OPENING.index(ch)])
        elif ch in _CLOSING and (not stack or stack.pop() != ch):
            return False
    return not stack


def _runs_on(text: str) -> bool:
    """A sentence ends inside the field and more words follow: '. The answer', '? and'."""
    for m in _RUN_ON.finditer(text):
        word, mark = m.group(1).strip("\"'()[]{}").lower(), m.group(2)
        if mark == "?":
            return True
        letters = word.replace(".", "")
        if len(letters) <= 1 or "." in word or word in _ABBREVIATIONS or letters.isdigit():
            continue  # "J. Smith", "U.S. Army", "St. Louis", "1. FC Köln"
        return True
    return False


def field_problem(text: str, relation: bool = False) -> str | None:
    """Why a triplet field is not a name or a short phrase (module docstring); None when it is one."""
    plain = text.replace("’", "'")
    if relation:
        words, chars = TRIPLET_RELATION_WORDS, TRIPLET_RELATION_CHARS
    else:
        words, chars = TRIPLET_NAME_WORDS, TRIPLET_NAME_CHARS
    if len(plain.split()) > words or len(plain) > chars:
        return f"is longer than {words} words or {chars} characters"
    if not balanced(plain):
        return "has unbalanced brackets"
    if any(sep in plain for sep in _TRIPLE_SEPS):
        return "holds a triplet separator (another triplet run into it)"
    if _runs_on(plain) or _CLAUSE.search(plain):
        return "runs on into a sentence"
    if relation and (
        _CONVERSATION.search(plain) or (len(plain.split()) >= 4 and plain.rstrip().endswith((".", "!")))
    ):
        return "reads as conversation or a sentence"
    return None


def triplet_problem(subject: str, relation: str, obj: str) -> str | None:
    """Why ``(subject ; relation ; object)`` is not a triplet; None when it is one."""
    for name, text in (("subject", subject), ("relation", relation), ("object", obj)):
        why = field_problem(text, relation=name == "relation")
        if why:
            return f"its {name} {text!r} {why}"
    return None


def check_triplet(subject: str, relation: str, obj: str, line: str) -> None:
    """Raise ``ParseError`` naming the line when it is not a triplet (``triplet_problem``)."""
    why = triplet_problem(subject, relation, obj)
    if why:
        raise ParseError(
            f"{line.strip()!r} is not one triplet: {why}; write one '(subject ; relation ; object)' per "
            "line, each field a name or a short phrase"
        )


class Triplets(list):
    """The triplets of a completion; ``rejected``: the lines that were not a triplet, each with why."""

    def __init__(self, items=(), rejected: list[str] | None = None):
        super().__init__(items)
        self.rejected: list[str] = list(rejected or [])

    @classmethod
    def read(cls, items: Iterable[Any], parse: Callable[[Any], tuple[str, str, str]]) -> Triplets:
        """Every item ``parse`` reads, de-duplicated in order; why each other one failed in ``rejected``."""
        triplets = cls()
        for item in items:
            try:
                t = parse(item)
            except ParseError as exc:
                triplets.rejected.append(str(exc))
                continue
            if t not in triplets:
                triplets.append(t)
        return triplets


# ---------------------------------------------------------------- the step formats: bounds and interface

# Field bounds shared by every syntax: the grammar enforces them; the parsers accept longer fields.
# A constrained explore reply stays within about 96 tokens (the demo's llm.max_new_tokens), so a
# rambling thought cannot push its lookups past the budget.
THOUGHT_CHARS = 160
ANSWER_CHARS = 60
ENTITY_CHARS = 50
RELATION_CHARS = 30
PART_CHARS = 50  # subject and object of a triplet
QUALIFIER_CHARS = 30  # the bracketed qualifier a subject or object may end with: " (1945 film)"
# what a constrained triplet field cannot hold (a character class, '\\[' '\\]' escaped): no separator
# (a second triplet), no bracket but the one qualifier (balanced), no question or exclamation mark
# (a sentence); a relation also no period or comma (a short phrase). The parser checks the rest.
NAME_EXCLUDE = ";|()\\[\\]{}?!"
RELATION_EXCLUDE = NAME_EXCLUDE + ".,"
MAX_TRIPLETS = 3
KINDS = ("explore", "complete", "final")


STEP_FUNCTIONS = tuple(f"{verb}_{kind}" for verb in ("render", "parse") for kind in KINDS)


class StepFormat:
    """A syntax's renderer and parser of each step kind (``render_explore`` ... ``parse_final``), bound
    from the mapping a subclass names: ``class TextFormat(StepFormat, functions=globals())``."""

    syntax: str

    def __init_subclass__(cls, functions: dict, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in STEP_FUNCTIONS:
            setattr(cls, name, staticmethod(functions[name]))
