"""The supervision variants, one registered object each (docs/design.md §3): the only list of them.

A variant is what a round's supervision set keeps of its correct trajectories. Its object says
everything the rest of the factory asks about it: its keep rule (the function itself, from
``factory.variants.kept``), whether that rule reads the backtrace labels, the dataset card's sentence,
what the reports compare it with and the question that comparison answers, its plot label, and (for a
matched control) the variant whose removed units it must match one for one: the random rule's
``matched_to`` parameter. Sets, the TRACE export, the cards, the gates, the reports and dvc.yaml's
plots ask this module; ``select_units`` is the one place that applies a rule. A name in
``bootstrap.variants`` without an object fails when a command loads its params (``factory.names``).
The names are the selection methods' (``factory.utils.selection``), the same in the relevance and
calibration checks.

Adding a variant: docs/development.md#adding-a-variant.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from factory.utils import selection
from factory.utils.errors import FactoryError
from factory.variants.kept import (
    Selection,
    all_units,
    check_labels,
    keep_authors_rule,
    keep_backtrace,
    keep_random,
    keep_unfiltered,
)


@dataclass(frozen=True)
class Variant:
    """One supervision variant."""

    name: str  # the id in params (bootstrap.variants), paths (data/supervision/<name>/) and reports
    rule: Callable[..., Selection]  # its keep rule: (trajectory, labels_row, seed[, matched_to]) -> Selection
    needs_labels: bool  # the rule reads the trajectory's backtrace labels (else the trajectory alone)
    card: str  # the dataset card's sentence on what the set keeps
    label: str  # its name in figures and tables
    question: str = ""  # what comparing the reference with it answers (reports/bootstrap.md)
    matched_to: str = ""  # the variant whose removed units it matches per trajectory (its rule's parameter)


BACKTRACE = Variant(
    name=selection.BACKTRACE,
    rule=keep_backtrace,
    needs_labels=True,
    card="Only generations that contributed to the correct answer (knowledge backtracing) are kept.",
    label="backtrace (S_q)",
)
RANDOM = Variant(
    name=selection.RANDOM,
    rule=keep_random,
    needs_labels=True,
    card="Control set: per trajectory, as many units removed as backtracing removed, chosen at random.",
    label="random (matched size)",
    question="Does backtracing beat dropping as many generations at random?",
    matched_to=BACKTRACE.name,
)
UNFILTERED = Variant(
    name=selection.UNFILTERED,
    rule=keep_unfiltered,
    needs_labels=False,
    card="Every generation of every correct trajectory (STaR-style).",
    label="unfiltered (STaR)",
    question="Does filtering beat keeping every generation of a correct trajectory?",
)
AUTHORS_RULE = Variant(
    name=selection.AUTHORS_RULE,
    rule=keep_authors_rule,
    needs_labels=False,
    card=(
        "Control set: the generations the KnowTrace authors' own backtracing rule keeps (each "
        "completion's first triplet, raw names, shortest paths between substring-matched entities)."
    ),
    label="authors' rule",
    question="Does our labelling beat the authors' in training?",
)

# The reference every other variant is compared with; the order is the order of tables and figures.
REFERENCE = BACKTRACE
REGISTRY: dict[str, Variant] = {v.name: v for v in (BACKTRACE, RANDOM, UNFILTERED, AUTHORS_RULE)}
NAMES: tuple[str, ...] = tuple(REGISTRY)
DEFAULT: tuple[str, ...] = (BACKTRACE.name, RANDOM.name, UNFILTERED.name)  # the demo's three


class UnknownVariant(FactoryError, ValueError):
    """A variant name without a registered object (also a ValueError: params validation reports it)."""

    def __init__(self, name: str):
        super().__init__(
            f"unknown supervision variant {name!r}: the registered ones are {', '.join(NAMES)} "
            "(factory/variants/registry.py; to add one see docs/development.md#adding-a-variant)"
        )


def variant(name: str) -> Variant:
    """The registered variant called ``name`` (``UnknownVariant`` otherwise)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownVariant(name) from None


def select_units(trajectory: Mapping, labels_row: Mapping | None, name: str, seed: int) -> Selection:
    """What the variant called ``name`` keeps of ``trajectory`` (``labels_row``: its backtrace labels,
    None where the trajectory has none; an error for a variant whose rule needs them)."""
    v = variant(name)
    if labels_row is None and v.needs_labels:
        raise FactoryError(
            f"trajectory {trajectory.get('trajectory_id', '?')!r}: the {name} variant needs the "
            "trajectory's backtrace labels"
        )
    if labels_row is not None:
        check_labels(trajectory, labels_row, *all_units(trajectory))
    if v.matched_to:
        return v.rule(trajectory, labels_row, seed, matched_to=variant(v.matched_to))
    return v.rule(trajectory, labels_row, seed)
