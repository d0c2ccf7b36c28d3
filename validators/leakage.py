"""Leakage: no held-out or test question, by id or by normalised question text, in a training set.

One definition for the two gates that check it: ``ingest`` (the train split of the ingested
questions: splits are keyed by the normalised text, so a train question never shares its text with
an evaluation question, and ids are unique, so no id is in two splits) and ``variants`` (every
example of a supervision set comes from a train question, by id and by text).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

EVAL_SPLITS = ("heldout", "test")


def eval_question_texts(questions: Iterable[Mapping]) -> set[str]:
    """Normalised texts of the held-out and test questions."""
    return {q["question_norm"] for q in questions if q["split"] in EVAL_SPLITS}


def train_text_of_eval_question(questions: Sequence[Mapping]) -> list[bool]:
    """Per question: True for a train question whose normalised text is a held-out or test question's."""
    eval_texts = eval_question_texts(questions)
    return [q["split"] == "train" and q["question_norm"] in eval_texts for q in questions]
