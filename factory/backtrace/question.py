"""Entities of a question: the nodes its named entities link to (the initial entities' fallback).

The question is plain text, so its letter case says which words are names. The rules:

1. Node names found in the question as whole words (normalised), longest first, each matched span
   consumed ("Hiran region of Somalia" does not also yield "Somalia").
2. A match is *proper* when its span holds a digit or a capitalised word that is not the question's
   first word, and has a strong token (``factory.backtrace.names``). When any proper match exists, the
   others are left out: "What currency predated the Euro in the country Signmark is from?" starts from
   "euro" and "signmark", not from the nodes "currency" and "country", which name kinds of things
   and join unrelated passages.
3. Runs of capitalised words that no match covered ("Jonathan Reid", when the graph only has
   "Jonathan Douglass Reid") are linked like any mention (``Linker.candidates``: containment, fuzzy
   with its subset guard, embedding when enabled) when the link is unambiguous: a run that several
   nodes contain ("Olympics" in every "<year> Summer Olympics") names no single node and is left out.

Without any proper match or linked run, every match of rule 1 is kept (a question written in lower
case still has its entities).
"""

from __future__ import annotations

import re

from factory.backtrace.linking import Linker
from factory.backtrace.names import STOP_WORDS
from factory.backtrace.nodes import is_specific, normalize_entity

_WORD = re.compile(r"\S+")
# words that may sit inside a capitalised name ("Sangre de Cristo", "Mr. Smith Goes to Washington")
_CONNECT = frozenset("of the de del la le von van der di da du and for to on in y".split())


def _tokens(question: str) -> list[tuple[str, str, int]]:
    """(normalised token, original word, word position) for every word that normalises to something;
    a word like "Shangri-La" is one token ("shangrila"), "the" none."""
    out = []
    for position, match in enumerate(_WORD.finditer(question)):
        word = match.group()
        for token in normalize_entity(word).split():
            out.append((token, word, position))
    return out


def _is_capitalised(word: str, position: int) -> bool:
    head = word.lstrip("\"'“‘([")
    return bool(head[:1]) and head[:1].isupper() and position > 0


def _proper(tokens: list[tuple[str, str, int]], start: int, end: int) -> bool:
    words = tokens[start:end]
    return any(_is_capitalised(w, p) or any(c.isdigit() for c in t) for t, w, p in words)


def question_entities(question: str, linker: Linker) -> list[str]:
    """Nodes the question's entities link to (module docstring), in the order found, without duplicates."""
    tokens = _tokens(question or "")
    if not tokens:
        return []
    # token-aligned text: each token owns the characters [offset[i], offset[i] + len)
    offsets, pos = [], 1
    for token, _, _ in tokens:
        offsets.append(pos)
        pos += len(token) + 1
    work = " " + " ".join(t for t, _, _ in tokens) + " "
    start_of = {o: i for i, o in enumerate(offsets)}
    consumed = [False] * len(tokens)
    proper: list[str] = []
    other: list[str] = []
    for padded, node in linker.names_by_length():
        at = work.find(padded)
        while at >= 0:
            first = start_of[at + 1]
            last = first + len(padded.split())
            target = proper if is_specific(padded.strip()) and _proper(tokens, first, last) else other
            if node not in target:
                target.append(node)
            for i in range(first, last):
                consumed[i] = True
            # consume the span, keeping every offset in place
            work = work[: at + 1] + "\x00" * (len(padded) - 2) + work[at + len(padded) - 1 :]
            at = work.find(padded)
    for run in _capitalised_runs(tokens, consumed):
        nodes, _ = linker.candidates(run)
        if len(nodes) == 1 and nodes[0] not in proper:  # an ambiguous run ("Olympics") names no one node
            proper.append(nodes[0])
    if proper:
        return proper
    return other


def _capitalised_runs(tokens: list[tuple[str, str, int]], consumed: list[bool]) -> list[str]:
    """Unconsumed runs of capitalised words (connectors allowed inside, not at the ends), as text."""
    runs: list[list[str]] = []
    run: list[str] = []
    last_position = -1
    for i, (token, word, position) in enumerate(tokens):
        if position == last_position:  # another token of the same word
            if run:
                run.append(token)
            continue
        last_position = position
        if not consumed[i] and (_is_capitalised(word, position) or (run and token in _CONNECT)):
            run.append(token)
            continue
        if run:
            runs.append(run)
        run = []
    if run:
        runs.append(run)
    out = []
    for run in runs:
        while run and (run[-1] in _CONNECT or run[-1] in STOP_WORDS):
            run = run[:-1]
        if run:
            out.append(" ".join(run))
    return out
