"""Leakage: no held-out or test question, by id or by normalised question text, in a training set.

One definition for the gates that check it. ``ingest``: train and held-out both come from official
train, split by a hash of the normalised text, so no train question shares its text with a held-out
one, and every test question is an official dev question. Official train repeating official dev (the
same text, a near-duplicate, the same chain) is the decontaminate stage's to find and remove
(``factory.decontamination``); ``variants`` then checks that every example of a supervision set comes
from a clean train question, by id and by text against every held-out and test question.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

EVAL_SPLITS = ("heldout", "test")


def eval_question_texts(questions: Iterable[Mapping]) -> set[str]:
    """Normalised texts of the held-out and test questions."""
    return {q["question_norm"] for q in questions if q["split"] in EVAL_SPLITS}


def train_text_of_heldout_question(questions: Sequence[Mapping]) -> list[bool]:
    """Per question: True for a train question whose normalised text is a held-out question's."""
    heldout = {q["question_norm"] for q in questions if q["split"] == "heldout"}
    return [q["split"] == "train" and q["question_norm"] in heldout for q in questions]


def split_follows_official(questions: Iterable[Mapping]) -> list[bool]:
    """Per question: official train gives train or held-out, official dev gives test (and only it)."""
    return [(q["official_split"] == "dev") == (q["split"] == "test") for q in questions]
