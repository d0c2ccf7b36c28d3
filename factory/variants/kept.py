"""What each supervision variant keeps of a trajectory (docs/design.md §3).

``kept_units`` is the ONE place that decides what a variant keeps of a trajectory; the supervision
sets, the TRACE export and the gates all call it, so the variants stay comparable:

- ``backtrace``: the labels' kept sets (S_q, its pairs and steps);
- ``unfiltered``: every pair, every triplet, every step (STaR-style);
- ``random``: per trajectory exactly as many pairs AND as many triplets removed as backtracing removed,
  chosen uniformly at random with ``random.Random(hash(seed, trajectory_id))`` — matched in size and in
  the mix of unit kinds; steps then follow the backtracing rule (an explore step with no pair left is
  dropped, a complete step with no triplet left is dropped, the final answer step is always kept).

Steps whose status is not ``ok`` (unparseable or failed calls) are never kept by any variant: their
output cannot be re-rendered and would teach the model a broken format. They hold no units (the agent
records no pairs/triplets for a failed step), so the unit counts of the variants are unaffected.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from factory.config import VARIANTS
from factory.utils.errors import FactoryError


@dataclass(frozen=True)
class Kept:
    """What a variant keeps of one trajectory (ids in trajectory order) and how many units it removed."""

    triplet_ids: tuple[str, ...]
    pair_ids: tuple[str, ...]
    step_indices: tuple[int, ...]
    removed_units: int  # removed_pairs + removed_triplets
    removed_pairs: int = 0
    removed_triplets: int = 0


def _tid(trajectory: Mapping) -> str:
    return str(trajectory.get("trajectory_id", "?"))


def all_units(trajectory: Mapping) -> tuple[list[str], list[str]]:
    """(pair ids of the explore steps, triplet ids of G), in trajectory order; duplicates are an error."""
    pairs = [
        p["pair_id"]
        for s in trajectory.get("steps") or []
        if s.get("kind") == "explore"
        for p in s.get("pairs") or []
    ]
    triplets = [t["triplet_id"] for t in trajectory.get("triplets") or []]
    for kind, ids in (("pair", pairs), ("triplet", triplets)):
        dup = [i for i, n in Counter(ids).items() if n > 1]
        if dup:
            raise FactoryError(
                f"trajectory {_tid(trajectory)!r}: {kind} ids are not unique ({sorted(dup)[:3]})"
            )
    return pairs, triplets


def is_answer_step(step: Mapping) -> bool:
    """The final answer step: a ``final`` step, or an explore step that said 'sufficient' and answered."""
    return step.get("kind") == "final" or (step.get("kind") == "explore" and bool(step.get("sufficient")))


def steps_by_rule(
    trajectory: Mapping, pair_ids: Iterable[str], triplet_ids: Iterable[str]
) -> tuple[int, ...]:
    """Steps kept given kept pairs/triplets, by the backtracing rule (ok steps only)."""
    kp, kt = set(pair_ids), set(triplet_ids)
    kept = []
    for step in trajectory.get("steps") or []:
        if step.get("status") != "ok":
            continue
        has_pair = step.get("kind") == "explore" and any(p["pair_id"] in kp for p in step.get("pairs") or [])
        has_triplet = step.get("kind") == "complete" and any(t in kt for t in step.get("triplet_ids") or [])
        if is_answer_step(step) or has_pair or has_triplet:
            kept.append(step["index"])
    return tuple(kept)


def control_rng(seed: int, trajectory_id: str) -> random.Random:
    """The random control's RNG for one trajectory: a stable hash of (seed, trajectory id)."""
    digest = hashlib.blake2b(f"random-control:{seed}:{trajectory_id}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "big"))


def _check_labels(trajectory: Mapping, labels_row: Mapping, pairs: list[str], triplets: list[str]) -> None:
    tid = _tid(trajectory)
    if labels_row.get("trajectory_id") != tid:
        raise FactoryError(
            f"trajectory {tid!r}: labels row belongs to trajectory {labels_row.get('trajectory_id')!r}"
        )
    steps = {s["index"] for s in trajectory.get("steps") or []}
    for name, known in (
        ("kept_pair_ids", set(pairs)),
        ("kept_triplet_ids", set(triplets)),
        ("kept_step_indices", steps),
    ):
        unknown = [x for x in labels_row.get(name) or [] if x not in known]
        if unknown:
            raise FactoryError(
                f"trajectory {tid!r}: labels field {name!r} refers to ids not in the trajectory: "
                f"{unknown[:3]}"
            )


def kept_units(trajectory: Mapping, labels_row: Mapping | None, variant: str, seed: int) -> Kept:
    """What ``variant`` keeps of ``trajectory`` (labels_row: its backtrace labels; may be None for
    unfiltered)."""
    if variant not in VARIANTS:
        raise FactoryError(f"unknown variant {variant!r} (expected one of {', '.join(VARIANTS)})")
    pairs, triplets = all_units(trajectory)
    ok_steps = tuple(s["index"] for s in trajectory.get("steps") or [] if s.get("status") == "ok")
    if variant == "unfiltered":
        return Kept(tuple(triplets), tuple(pairs), ok_steps, 0, 0, 0)
    if labels_row is None:
        raise FactoryError(
            f"trajectory {_tid(trajectory)!r}: the {variant} variant needs the trajectory's backtrace labels"
        )
    _check_labels(trajectory, labels_row, pairs, triplets)
    lp, lt = set(labels_row["kept_pair_ids"]), set(labels_row["kept_triplet_ids"])
    bt_pairs = [p for p in pairs if p in lp]
    bt_triplets = [t for t in triplets if t in lt]
    removed_pairs, removed_triplets = len(pairs) - len(bt_pairs), len(triplets) - len(bt_triplets)
    if variant == "backtrace":
        ls = set(labels_row["kept_step_indices"])
        steps = tuple(i for i in ok_steps if i in ls)
        return Kept(
            tuple(bt_triplets),
            tuple(bt_pairs),
            steps,
            removed_pairs + removed_triplets,
            removed_pairs,
            removed_triplets,
        )
    rng = control_rng(seed, _tid(trajectory))
    drop_pairs = set(rng.sample(pairs, removed_pairs))
    drop_triplets = set(rng.sample(triplets, removed_triplets))
    kp = tuple(p for p in pairs if p not in drop_pairs)
    kt = tuple(t for t in triplets if t not in drop_triplets)
    return Kept(
        kt,
        kp,
        steps_by_rule(trajectory, kp, kt),
        removed_pairs + removed_triplets,
        removed_pairs,
        removed_triplets,
    )


def whitespace_tokens(text: str) -> int:
    return len((text or "").split())
