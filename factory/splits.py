"""Deterministic train / held-out / test assignment.

A question's split is a pure function of (seed, dataset, source id) through a hash, so adding or
removing other records never moves it. Questions with equal normalised text form one group and
take the split of the group's smallest (dataset, source id): duplicates never straddle splits.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict

SPLITS = ("train", "heldout", "test")


def unit_hash(*parts: object) -> float:
    """A uniform number in [0, 1) from the parts (stable across runs, machines and Python versions)."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def split_of(seed: int, dataset: str, source_id: str, train: float, heldout: float) -> str:
    u = unit_hash("split", seed, dataset, source_id)
    if u < train:
        return "train"
    if u < train + heldout:
        return "heldout"
    return "test"


def assign_splits(questions: list[dict], seed: int, train: float, heldout: float, test: float) -> None:
    """Set ``split`` on every question in place."""
    total = train + heldout + test
    if total <= 0:
        raise ValueError("split fractions must not all be zero")
    train, heldout = train / total, heldout / total
    groups: dict[str, list[dict]] = defaultdict(list)
    for q in questions:
        groups[q["question_norm"]].append(q)
    for members in groups.values():
        anchor = min((q["dataset"], q["source_id"]) for q in members)
        split = split_of(seed, anchor[0], anchor[1], train, heldout)
        for q in members:
            q["split"] = split
