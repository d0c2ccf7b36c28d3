"""Paired bootstrap of a difference of per-question scores (EM 0/1), with a 95% percentile interval.

Two policies evaluated on the same questions give, per question, a score difference; resampling the
questions (with replacement) and averaging the differences gives the interval. The pairing is what
makes the interval narrow enough to be useful: the per-question differences of two similar policies
are mostly 0. Used by the stop rule (a round against the best policy so far, on the held-out split)
and by the report (variants against each other, on the test split, over protocol seed x question).
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Mapping

import numpy as np

# Differences of EM means are multiples of 1/n; a float tolerance keeps 0.15 - 0.10 (0.0499999...)
# equal to a min_delta of 0.05.
TOLERANCE = 1e-9


def rng_for(seed: int, *names: object) -> np.random.Generator:
    """A generator per (seed, names): an interval does not depend on what else was computed before it."""
    digest = hashlib.blake2b(
        ":".join(("paired", str(seed), *map(str, names))).encode(), digest_size=8
    ).digest()
    return np.random.default_rng(int.from_bytes(digest, "big"))


def paired_difference(
    a: Mapping[Hashable, float],
    b: Mapping[Hashable, float],
    *,
    samples: int,
    seed: int,
    names: tuple = (),
) -> dict:
    """Mean of a[k] - b[k] over the keys both have, and its 95% paired bootstrap interval.

    Returns {"n", "difference", "ci": [lo, hi]}; with no shared key, difference and ci are None.
    """
    keys = sorted(set(a) & set(b), key=repr)
    if not keys:
        return {"n": 0, "difference": None, "ci": [None, None]}
    diffs = np.array([float(a[k]) - float(b[k]) for k in keys])
    idx = rng_for(seed, *names).integers(0, len(diffs), size=(samples, len(diffs)))
    lo, hi = np.percentile(diffs[idx].mean(axis=1), [2.5, 97.5])
    return {"n": len(keys), "difference": float(diffs.mean()), "ci": [float(lo), float(hi)]}


def scores_digest(scores: Mapping[Hashable, float]) -> str:
    """Short identity of a per-question score vector (decisions record it, so any change shows)."""
    h = hashlib.sha256()
    for key in sorted(scores, key=repr):
        h.update(f"{key}\t{float(scores[key])!r}\n".encode())
    return h.hexdigest()[:16]
