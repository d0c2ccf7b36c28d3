"""How alike two normalised questions are, for the near-duplicate rule: the IDF-weighted Dice coefficient
of their word sets, where a rare word without an equal partner may pair with a typo of itself.

Why this and not the field's tools (bench/decontamination_rules.py measures them side by side): multi-hop
questions are 10-25 words, so one typo or changed word breaks most of their 13-grams or 8-grams; a
character ratio (rapidfuzz ``ratio``) drops under rewording and clause reordering, and stays high for a
2WikiMultihopQA template about other entities ("Who was born first, A or B?"), whose template words are most
of the text. Weighting each word by its inverse document frequency over the evaluation questions makes the
template words weigh little and the entity words a lot, so a different entity costs most of the score while
a reordered clause or a swapped question word costs little. The weights come from the evaluation side: a
tiny evaluation set (tens of questions) has no template words to learn, and every word weighs as rare.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

import numpy as np
from rapidfuzz import fuzz

# Words shorter than this never pair as typos: "he"/"she", "was"/"has" differ in meaning, not in spelling.
MIN_TYPO_LENGTH = 4


class Vocabulary:
    """The words of the evaluation questions with their document frequency and IDF weight.

    ``weight = log((n + 1) / (df + 1)) + 1`` (smoothed IDF, as scikit-learn's): a word no evaluation question
    has weighs most, a template word in every question weighs 1, never 0, so that the question words of two
    texts still count a little.
    """

    def __init__(self, token_sets: Iterable[Iterable[str]]):
        df: Counter[str] = Counter()
        n = 0
        for tokens in token_sets:
            df.update(set(tokens))
            n += 1
        self.n = n
        # sorted so that token ids, hence everything built on them, never depend on the rows' order
        self.ids: dict[str, int] = {token: i for i, token in enumerate(sorted(df))}
        self.df = np.array([df[token] for token in sorted(df)], dtype=np.int64)
        self.weights = np.log((n + 1) / (self.df + 1)) + 1.0
        self.unseen_weight = math.log(n + 1) + 1.0
        # a word in at most one evaluation question, or in none, weighs at least this: only such a word may
        # be a typo (see soft_dice)
        self.rare_weight = math.log((n + 1) / 2) + 1.0

    def weight(self, token: str) -> float:
        i = self.ids.get(token)
        return self.unseen_weight if i is None else float(self.weights[i])

    def weigh(self, question_norm: str) -> dict[str, float]:
        """The question's distinct words with their weights, in the order they occur."""
        return {token: self.weight(token) for token in question_norm.split()}


def soft_dice(a: dict[str, float], b: dict[str, float], typo_ratio: float, rare_weight: float) -> float:
    """Weighted Dice of two weighed word sets (``Vocabulary.weigh``), in [0, 1].

    Equal words count fully on both sides. The words left over pair greedily, best first, as typos: when
    their rapidfuzz ``ratio`` is at least ``typo_ratio``, both have ``MIN_TYPO_LENGTH`` letters or more, and
    one of them is rare (weighs ``rare_weight`` or more: in at most one evaluation question). A misspelt word
    is one that the evaluation questions (nearly) never use; "paternal" / "maternal", "earlier" / "later"
    are common words that differ in meaning, not in spelling, and never pair. A pair counts its two weights
    times the ratio / 100 (a typo of an entity keeps most of its weight).
    """
    total = sum(a.values()) + sum(b.values())
    if total == 0:
        return 0.0
    shared = 2.0 * sum(w for token, w in a.items() if token in b)
    rest_a = [t for t in a if t not in b and len(t) >= MIN_TYPO_LENGTH]
    rest_b = [t for t in b if t not in a and len(t) >= MIN_TYPO_LENGTH]
    if rest_a and rest_b:
        shared += _typo_pairs(a, b, rest_a, rest_b, typo_ratio, rare_weight)
    return shared / total


def _typo_pairs(a: dict, b: dict, rest_a: list, rest_b: list, cutoff: float, rare_weight: float) -> float:
    pairs = []
    for ta in rest_a:
        for tb in rest_b:
            if a[ta] < rare_weight and b[tb] < rare_weight:
                continue
            r = fuzz.ratio(ta, tb, score_cutoff=cutoff)
            if r:
                pairs.append((-r, ta, tb))  # best first; ties by the words themselves, so deterministic
    credit, used_a, used_b = 0.0, set(), set()
    for neg_r, ta, tb in sorted(pairs):
        if ta not in used_a and tb not in used_b:
            used_a.add(ta)
            used_b.add(tb)
            credit += (a[ta] + b[tb]) * (-neg_r / 100.0)
    return credit
