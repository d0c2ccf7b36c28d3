"""The same_chain rule's keys: a reasoning chain is its answer over its set of supporting titles.

Two questions with the same (normalised) answer over the same set of supporting titles ask the same chain
in other words, unless the answer says little about the chain. A yes/no answer, or an answer that is one of
the question's own options ("Which film came out first, X or Y?" -> "X"), is shared by many different
questions over the same titles ("Are X and Y both American?" / "Were X and Y of the same nationality?";
"Which came out first?" / "Which is longer?"): for those the guard asks the questions' other words to agree
too (``guard_similarity``). Measured (bench/decontamination_rules.py): without the guard every other
comparison of the same two entities with the same answer is flagged; at 0.75, 0.8% (HotpotQA) and 2.2%
(2WikiMultihopQA), at the price of restatements of such questions.
"""

from __future__ import annotations

from factory.utils.text import normalize_answer

YES_NO = frozenset(("yes", "no"))


def titles_key(titles: list[str]) -> tuple[str, ...]:
    """The set of supporting titles, normalised (case and punctuation variants of a title are one title)."""
    return tuple(sorted({normalize_answer(t) for t in titles} - {""}))


def answer_keys(answers: list[str]) -> list[str]:
    """The normalised answers (gold and aliases), each once, in order."""
    return list(dict.fromkeys(a for a in map(normalize_answer, answers) if a))


def weak_answer(answer_norm: str, question_norm: str) -> bool:
    """True when the answer does not identify the chain: yes/no, or words of the question itself."""
    return answer_norm in YES_NO or f" {answer_norm} " in f" {question_norm} "


def residual_words(question_norm: str, titles: tuple[str, ...], answer_norm: str) -> set[str]:
    """The question's words that are not words of its supporting titles or its answer: what it asks of them
    ("are both american" of "are both jim mcbride and neil jordan american")."""
    named = {w for t in titles for w in t.split()} | set(answer_norm.split())
    return {w for w in question_norm.split() if w not in named}


def guard_similarity(a: set[str], b: set[str]) -> float:
    """Dice coefficient of two residual word sets (1.0 when both are empty: nothing asked beyond names)."""
    if not a and not b:
        return 1.0
    return 2 * len(a & b) / (len(a) + len(b))
