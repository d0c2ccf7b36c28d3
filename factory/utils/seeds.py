"""The one rule that derives a stage's seed in a protocol chain (docs/design.md §12).

Every stage that draws (question samples, the random control, the counterfactual's removals, training)
takes its param seed through ``derived_seed``, so chain k of a protocol with several seeds draws
differently from chain 0 and a stage's seed is never written by hand twice.
"""

from __future__ import annotations


def derived_seed(base_seed: int, protocol_seed: int = 0, round_: int | None = None) -> int:
    """A stage's effective seed: its param seed + 1000 x the protocol seed (+ the round for a fresh draw)."""
    return int(base_seed) + 1000 * int(protocol_seed) + (int(round_) if round_ is not None else 0)
