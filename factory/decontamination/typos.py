"""Typo neighbours: the indexed evaluation words one edit away from a word that no evaluation question uses,
so that a pool question whose only rare word is misspelt still finds its evaluation question as a candidate.

A deletion-neighbourhood index, as SymSpell builds one: two words one insertion, deletion, substitution or
adjacent transposition apart share a form with at most one letter deleted. It is written here because
rapidfuzz scores pairs but has no index of neighbours, and the SymSpell packages are not dependencies; it is
a dict of about (letters + 1) forms per indexed word of four letters or more (some hundred thousand short
strings at 22k evaluation questions).
"""

from __future__ import annotations

from collections.abc import Iterable

from factory.decontamination.similarity import MIN_TYPO_LENGTH


def forms(word: str) -> set[str]:
    """The word and every string one deletion away from it."""
    return {word} | {word[:i] + word[i + 1 :] for i in range(len(word))}


class TypoNeighbours:
    """Word id lists by deletion form, over ``(word, id)`` pairs of the words that may be typo partners."""

    def __init__(self, words: Iterable[tuple[str, int]]):
        self.by_form: dict[str, list[int]] = {}
        for word, i in words:
            if len(word) >= MIN_TYPO_LENGTH:
                for form in forms(word):
                    self.by_form.setdefault(form, []).append(i)

    def of(self, word: str) -> set[int]:
        """Ids of the indexed words one edit away from ``word`` (none for a word under four letters)."""
        if len(word) < MIN_TYPO_LENGTH:
            return set()
        return {i for form in forms(word) for i in self.by_form.get(form, ())}
