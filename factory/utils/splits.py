"""Deterministic train / held-out / test assignment from each question's official split.

The official train files give the training pool: a question of official train is ``heldout`` when a
hash of (seed, normalised question text) falls under ``splits.heldout``, ``train`` otherwise. The
official dev (validation) files are evaluation sets: every question of official dev is ``test``, and
the test evaluation draws its seeded sample from them (``evaluate.n_questions``), the protocol of the
papers the field compares with. No question of an official dev file is trained on or held out.

The hash is a pure function of the seed and the text: adding or removing other records never moves a
question between train and held-out, and equal texts share that split within and across datasets.
A training-pool question that repeats an evaluation question (the same text, a near-duplicate, the
same reasoning chain) is removed later by the decontaminate stage (``factory.decontamination``).
"""

from __future__ import annotations

import hashlib

SPLITS = ("train", "heldout", "test")
OFFICIAL_SPLITS = ("train", "dev")  # what a corpus file is: an official training or evaluation split
TEST = "test"  # the split of every official dev question


def unit_hash(*parts: object) -> float:
    """A uniform number in [0, 1) from the parts (stable across runs, machines and Python versions)."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def split_of(seed: int, question_norm: str, official_split: str, heldout: float) -> str:
    """The split of a question from its official split and normalised text (``heldout``: the fraction
    of official train held out)."""
    if official_split != "train":
        return TEST
    return "heldout" if unit_hash("split", seed, question_norm) < heldout else "train"


def assign_splits(questions: list[dict], seed: int, heldout: float) -> None:
    """Set ``split`` on every question in place, from its ``official_split`` and ``question_norm``."""
    for q in questions:
        q["split"] = split_of(seed, q["question_norm"], q["official_split"], heldout)
