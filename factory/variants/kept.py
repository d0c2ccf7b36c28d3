"""The keep rules of the supervision variants (docs/design.md §3): what a variant selects of one trajectory.

A rule is a function ``(trajectory, labels_row, seed) -> Selection`` held by its variant
(``factory.variants.registry.Variant.rule``); ``factory.variants.registry.select_units`` is the ONE
place that applies it. The variants stage writes what it selected (``kept.parquet``, read by the TRACE
export); the gates call it to check the matched control. The rules, named after their variants
(``factory.utils.selection``):

- ``keep_backtrace``: the labels' kept sets (S_q, its pairs and steps);
- ``keep_unfiltered``: every pair, every triplet, every step (STaR-style);
- ``keep_random``: per trajectory exactly as many pairs AND as many triplets removed as the variant it
  is matched to (its ``matched_to``: backtrace) removed, chosen uniformly at random with
  ``random.Random(stream_seed("random-control", seed, trajectory_id))`` — matched in size and in the
  mix of unit kinds; steps then follow the backtracing rule (an explore step with no pair left is
  dropped, a complete step with no triplet left is dropped, the final answer step is always kept);
- ``keep_authors_rule``: the triplets the KnowTrace authors' rule keeps
  (``factory.backtrace.authors_rule``, on the trajectory alone), the pairs those triplets answer, and
  steps by the backtracing rule.

Steps whose status is not ``ok`` (unparseable or failed calls) are never kept by any variant: their
output cannot be re-rendered and would teach the model a broken format. They hold no units (the agent
records no pairs/triplets for a failed step), so the unit counts of the variants are unaffected.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from factory.utils.errors import FactoryError
from factory.utils.seeds import stream_random


@dataclass(frozen=True)
class Selection:
    """What a variant keeps of one trajectory (ids in trajectory order) and how many units it removed."""

    triplet_ids: tuple[str, ...]
    pair_ids: tuple[str, ...]
    step_indices: tuple[int, ...]
    removed_units: int  # removed_pairs + removed_triplets
    removed_pairs: int = 0
    removed_triplets: int = 0


class Matched(Protocol):
    """What the random rule reads of the variant it matches (a ``factory.variants.registry.Variant``,
    which imports these rules: hence a protocol, not an import)."""

    name: str
    rule: Callable[..., Selection]


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


def check_labels(trajectory: Mapping, labels_row: Mapping, pairs: list[str], triplets: list[str]) -> None:
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


def _kept(
    trajectory: Mapping, pairs: list[str], triplets: list[str], kp: set, kt: set, steps=None
) -> Selection:
    """The kept ids in trajectory order (steps by the backtracing rule unless given) and what was removed."""
    kept_pairs = tuple(p for p in pairs if p in kp)
    kept_triplets = tuple(t for t in triplets if t in kt)
    removed_pairs, removed_triplets = len(pairs) - len(kept_pairs), len(triplets) - len(kept_triplets)
    if steps is None:
        steps = steps_by_rule(trajectory, kept_pairs, kept_triplets)
    return Selection(
        kept_triplets,
        kept_pairs,
        tuple(steps),
        removed_pairs + removed_triplets,
        removed_pairs,
        removed_triplets,
    )


def keep_unfiltered(trajectory: Mapping, labels_row: Mapping | None, seed: int) -> Selection:
    pairs, triplets = all_units(trajectory)
    ok_steps = [s["index"] for s in trajectory.get("steps") or [] if s.get("status") == "ok"]
    return _kept(trajectory, pairs, triplets, set(pairs), set(triplets), ok_steps)


def keep_backtrace(trajectory: Mapping, labels_row: Mapping, seed: int) -> Selection:
    pairs, triplets = all_units(trajectory)
    steps = set(labels_row["kept_step_indices"])
    ok_steps = [s["index"] for s in trajectory.get("steps") or [] if s.get("status") == "ok"]
    kp, kt = set(labels_row["kept_pair_ids"]), set(labels_row["kept_triplet_ids"])
    return _kept(trajectory, pairs, triplets, kp, kt, [i for i in ok_steps if i in steps])


def keep_random(trajectory: Mapping, labels_row: Mapping, seed: int, matched_to: Matched) -> Selection:
    """As many pairs and triplets removed as ``matched_to``'s rule removes, drawn at random."""
    pairs, triplets = all_units(trajectory)
    reference = matched_to.rule(trajectory, labels_row, seed)
    rng = stream_random("random-control", seed, _tid(trajectory))
    drop_pairs = set(rng.sample(pairs, reference.removed_pairs))
    drop_triplets = set(rng.sample(triplets, reference.removed_triplets))
    return _kept(trajectory, pairs, triplets, set(pairs) - drop_pairs, set(triplets) - drop_triplets)


def keep_authors_rule(trajectory: Mapping, labels_row: Mapping | None, seed: int) -> Selection:
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


def whitespace_tokens(text: str) -> int:
    return len((text or "").split())
