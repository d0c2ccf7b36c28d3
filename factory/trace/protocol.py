"""The TRACE protocol's text: the prompt (numbered passages) and the SFT target built from S_q.

``<relevance>`` (indices of the passages used) -> ``<analysis>`` (the kept triplets as statements
citing them, in chain order) -> ``<answer>``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from factory.utils.errors import FactoryError
from factory.utils.text import normalize_answer

_POSSESSIVE = re.compile(r"(\w)['’]s\b")

SYSTEM_PROMPT = (
    "Answer the question using the numbered passages. Reply in exactly this format and nothing else:\n"
    "<relevance>[i, j]</relevance><analysis>...</analysis><answer>...</answer>\n"
    "- relevance: the numbers of the passages you use, as a list in square brackets;\n"
    "- analysis: the facts from those passages that lead from the question to the answer, one after "
    "another, each followed by the number of its passage in square brackets, e.g. [2];\n"
    "- answer: a short answer only (a name, a date, a number, yes or no)."
)


def numbered_passages(trajectory: Mapping[str, Any], max_passages: int) -> tuple[list[str], int]:
    """Pids the trajectory retrieved, de-duplicated in first-retrieval order (steps by index), cut to
    ``max_passages``; also how many distinct passages were retrieved before the cut."""
    seen: list[str] = []
    for step in sorted(trajectory.get("steps") or [], key=lambda s: s["index"]):
        for pid in step.get("retrieved") or []:
            if pid not in seen:
                seen.append(pid)
    return seen[:max_passages], len(seen)


def _cut(text: str, limit: int) -> str:
    text = " ".join((text or "").split())
    if limit <= 0 or len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip() + " ..."


def render_user(question: str, passages: Sequence[Mapping[str, Any]], passage_chars: int = 0) -> str:
    """The user turn: the question, then ``[i] Title: text`` per numbered passage."""
    lines = [f"Question: {question}", "", "Passages:"]
    for i, p in enumerate(passages, start=1):
        lines.append(f"[{i}] {p['title']}: {_cut(p['text'], passage_chars)}")
    return "\n".join(lines)


def build_prompt(
    question: str,
    pids: Sequence[str],
    passages_by_pid: Mapping[str, Mapping[str, Any]],
    passage_chars: int = 0,
    where: str = "",
) -> list[dict]:
    """System + user messages for a question and its numbered passages."""
    missing = [pid for pid in pids if pid not in passages_by_pid]
    if missing:
        raise FactoryError(
            f"{where}: retrieved passages {missing[:3]} are not in the passage table (re-run ingest/index)"
        )
    user = render_user(question, [passages_by_pid[pid] for pid in pids], passage_chars)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def gold_reference(question_row: Mapping[str, Any], pids: Sequence[str]) -> tuple[list[int], str]:
    """(1-based indices of the numbered passages that are gold supporting paragraphs, coverage):
    coverage is ``full`` when every gold paragraph is numbered, ``partial`` when some are,
    ``none`` when none is (or the question names no supporting paragraph)."""
    gold = {s["pid"] for s in question_row.get("supporting") or [] if s.get("pid")}
    indices = [i for i, pid in enumerate(pids, start=1) if pid in gold]
    shown = {pids[i - 1] for i in indices}
    coverage = "full" if gold and shown == gold else ("partial" if shown else "none")
    return indices, coverage


def _mentions(a: str, b: str) -> bool:
    """Whole-word containment either way between two normalised names."""
    return bool(a and b) and (a == b or f" {a} " in f" {b} " or f" {b} " in f" {a} ")


def chain_order(
    triplets: Sequence[Mapping[str, Any]], initial_entities: Iterable[str], question: str = ""
) -> list[dict]:
    """Triplets ordered along the reasoning chain: start with a triplet whose subject is an initial
    entity (else a subject named in the question), then repeatedly the earliest-created triplet
    whose subject — failing that, whose object — is an entity reached so far; a triplet connected
    to nothing reached starts a new chain. Creation order breaks every tie."""
    reached = [n for n in (normalize_answer(e) for e in initial_entities) if n]
    if not reached:
        q = " " + normalize_answer(_POSSESSIVE.sub(r"\1", question)) + " "  # "Township's" names "Township"
        reached = [s for s in (normalize_answer(t["subject"]) for t in triplets) if s and f" {s} " in q]
    remaining = list(triplets)  # creation order
    ordered: list[dict] = []

    def is_reached(name: str) -> bool:
        n = normalize_answer(name)
        return any(_mentions(n, r) for r in reached)

    while remaining:
        pick = next((t for t in remaining if is_reached(t["subject"])), None)
        if pick is None:
            pick = next((t for t in remaining if is_reached(t["object"])), None)
        if pick is None:
            pick = remaining[0]
        remaining.remove(pick)
        ordered.append(dict(pick))
        reached.extend(n for n in (normalize_answer(pick["subject"]), normalize_answer(pick["object"])) if n)
    return ordered


def render_statement(triplet: Mapping[str, Any], index: int) -> str:
    return f"{triplet['subject']} ({triplet['relation']}): {triplet['object']} [{index}]."


def render_target(relevance: Sequence[int], statements: Sequence[str], answer: str) -> str:
    """The assistant turn of the protocol."""
    analysis = " ".join([*statements, f"So the answer is {answer}."])
    indices = ", ".join(str(i) for i in relevance)
    return f"<relevance>[{indices}]</relevance><analysis>{analysis}</analysis><answer>{answer}</answer>"
