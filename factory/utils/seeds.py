"""The one rule that derives a stage's seed in a protocol chain (docs/design.md §12).

Every stage that draws (question samples, the random control, the counterfactual's removals, training)
takes its param seed through ``derived_seed``, so chain k of a protocol with several seeds draws
differently from chain 0 and a stage's seed is never written by hand twice. ``stream_seed`` is the one
per-item hash (a trajectory's random control, a resample) and ``seed_series`` the seeds of a control
drawn several times.
"""

from __future__ import annotations

import hashlib
import random


def derived_seed(base_seed: int, protocol_seed: int = 0, round_: int | None = None) -> int:
    """A stage's effective seed: its param seed + 1000 x the protocol seed (+ the round for a fresh draw)."""
    return int(base_seed) + 1000 * int(protocol_seed) + (int(round_) if round_ is not None else 0)


def stream_seed(stream: str, seed: int, *names: object) -> int:
    """A 64-bit seed per (stream, seed, names), e.g. ``("random-control", 17, trajectory_id)``: a stable
    hash (blake2b of ``stream:seed:name...``), so a draw does not depend on the order draws are made in,
    on the process or on the machine."""
    key = ":".join((stream, str(seed), *map(str, names)))
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


def stream_random(stream: str, seed: int, *names: object) -> random.Random:
    """``random.Random`` seeded by ``stream_seed`` (the per-trajectory draws of the random controls)."""
    return random.Random(stream_seed(stream, seed, *names))


def seed_series(seed: int, count: int) -> list[int]:
    """The seeds of a control drawn ``count`` times: ``seed``, ``seed + 1``, ..."""
    return [int(seed) + k for k in range(int(count))]
