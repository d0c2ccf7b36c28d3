"""The keep rules of the supervision variants (docs/design.md §3) and the one way to apply them.

``kept_units`` is the ONE place that decides what a variant keeps of a trajectory: it looks the
variant up in ``factory.variants.registry`` and runs its rule from ``RULES``. The variants stage calls
it and writes what it kept (``kept.parquet``, read by the TRACE export); the gates call it to check the
matched control. The rules:

- ``backtraced``: the labels' kept sets (S_q, its pairs and steps);
- ``everything``: every pair, every triplet, every step (STaR-style);
- ``random_at_matched_size``: per trajectory exactly as many pairs AND as many triplets removed as
  backtracing removed, chosen uniformly at random with ``random.Random(hash(seed, trajectory_id))`` —
  matched in size and in the mix of unit kinds; steps then follow the backtracing rule (an explore step
  with no pair left is dropped, a complete step with no triplet left is dropped, the final answer step
  is always kept);
- ``by_authors_rule``: the triplets the KnowTrace authors' rule keeps
  (``factory.backtrace.authors_rule``, on the trajectory alone), the pairs those triplets answer, and
  steps by the backtracing rule.

Steps whose status is not ``ok`` (unparseable or failed calls) are never kept by any variant: their
output cannot be re-rendered and would teach the model a broken format. They hold no units (the agent
records no pairs/triplets for a failed step), so the unit counts of the variants are unaffected.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from factory.utils.errors import FactoryError
from factory.variants.registry import variant as registered


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


def _kept(trajectory: Mapping, pairs: list[str], triplets: list[str], kp: set, kt: set, steps=None) -> Kept:
    """The kept ids in trajectory order (steps by the backtracing rule unless given) and what was removed."""
    kept_pairs = tuple(p for p in pairs if p in kp)
    kept_triplets = tuple(t for t in triplets if t in kt)
    removed_pairs, removed_triplets = len(pairs) - len(kept_pairs), len(triplets) - len(kept_triplets)
    if steps is None:
        steps = steps_by_rule(trajectory, kept_pairs, kept_triplets)
    return Kept(
        kept_triplets,
        kept_pairs,
        tuple(steps),
        removed_pairs + removed_triplets,
        removed_pairs,
        removed_triplets,
    )


def everything(trajectory: Mapping, labels_row: Mapping | None, seed: int) -> Kept:
    pairs, triplets = all_units(trajectory)
    ok_steps = [s["index"] for s in trajectory.get("steps") or [] if s.get("status") == "ok"]
    return _kept(trajectory, pairs, triplets, set(pairs), set(triplets), ok_steps)


def backtraced(trajectory: Mapping, labels_row: Mapping, seed: int) -> Kept:
    pairs, triplets = all_units(trajectory)
    steps = set(labels_row["kept_step_indices"])
    ok_steps = [s["index"] for s in trajectory.get("steps") or [] if s.get("status") == "ok"]
    kp, kt = set(labels_row["kept_pair_ids"]), set(labels_row["kept_triplet_ids"])
    return _kept(trajectory, pairs, triplets, kp, kt, [i for i in ok_steps if i in steps])


def random_at_matched_size(trajectory: Mapping, labels_row: Mapping, seed: int) -> Kept:
    pairs, triplets = all_units(trajectory)
    reference = backtraced(trajectory, labels_row, seed)
    rng = control_rng(seed, _tid(trajectory))
    drop_pairs = set(rng.sample(pairs, reference.removed_pairs))
    drop_triplets = set(rng.sample(triplets, reference.removed_triplets))
    return _kept(trajectory, pairs, triplets, set(pairs) - drop_pairs, set(triplets) - drop_triplets)


def by_authors_rule(trajectory: Mapping, labels_row: Mapping | None, seed: int) -> Kept:
    from factory.backtrace.authors_rule import authors_rule

    pairs, triplets = all_units(trajectory)
    kt = set(authors_rule(trajectory)["kept_triplet_ids"])
    # a pair is kept when a kept triplet answers it (the backtracing rule for pairs)
    kp = {t.get("pair_id") for t in trajectory.get("triplets") or [] if t["triplet_id"] in kt}
    kp |= {
        s.get("pair_id")
        for s in trajectory.get("steps") or []
        if s.get("kind") == "complete" and kt.intersection(s.get("triplet_ids") or ())
    }
    return _kept(trajectory, pairs, triplets, kp, kt)


# The keep rules by the name a registered variant gives (factory.variants.registry.Variant.rule).
RULES: dict[str, Callable[[Mapping, Mapping | None, int], Kept]] = {
    "everything": everything,
    "backtraced": backtraced,
    "random_at_matched_size": random_at_matched_size,
    "by_authors_rule": by_authors_rule,
}


def kept_units(trajectory: Mapping, labels_row: Mapping | None, variant: str, seed: int) -> Kept:
    """What ``variant`` keeps of ``trajectory`` (``labels_row``: its backtrace labels, None where the
    trajectory has none; an error for a variant whose rule needs them)."""
    v = registered(variant)
    if labels_row is None and v.needs_labels:
        raise FactoryError(
            f"trajectory {_tid(trajectory)!r}: the {variant} variant needs the trajectory's backtrace labels"
        )
    pairs, triplets = all_units(trajectory)
    if labels_row is not None:
        _check_labels(trajectory, labels_row, pairs, triplets)
    return RULES[v.rule](trajectory, labels_row, seed)


def whitespace_tokens(text: str) -> int:
    return len((text or "").split())
