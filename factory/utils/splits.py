"""Deterministic train / held-out / test assignment.

A question's split is a pure function of (seed, normalised question text) through a hash: adding or
removing other records never moves it, and questions with equal normalised text share a split, within
a dataset and across datasets alike, so no question text is both trained on and evaluated on.
"""

from __future__ import annotations

import hashlib

SPLITS = ("train", "heldout", "test")


def unit_hash(*parts: object) -> float:
    """A uniform number in [0, 1) from the parts (stable across runs, machines and Python versions)."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def split_of(seed: int, question_norm: str, train: float, heldout: float) -> str:
    """The split of a normalised question text (``train`` and ``heldout`` are fractions summing to <= 1)."""
    u = unit_hash("split", seed, question_norm)
    if u < train:
        return "train"
    if u < train + heldout:
        return "heldout"
    return "test"


def assign_splits(questions: list[dict], seed: int, train: float, heldout: float, test: float) -> None:
    """Set ``split`` on every question in place, from its ``question_norm``."""
    total = train + heldout + test
    if total <= 0:
        raise ValueError("split fractions must not all be zero")
    train, heldout = train / total, heldout / total
    cache: dict[str, str] = {}  # duplicates are common: hash each text once
    for q in questions:
        norm = q["question_norm"]
        split = cache.get(norm)
        if split is None:
            split = cache[norm] = split_of(seed, norm, train, heldout)
        q["split"] = split
