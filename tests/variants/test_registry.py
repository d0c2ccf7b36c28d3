"""The variant registry: every variant one object, every question about a variant answered by it."""

from __future__ import annotations

import pytest

from factory.backtrace.authors_rule import authors_rule
from factory.bootstrap.report import build_summary
from factory.params.config import load_params
from factory.utils import selection
from factory.utils.errors import FactoryError
from factory.variants import kept, registry
from factory.variants.kept import Selection, steps_by_rule
from factory.variants.registry import select_units
from factory.variants.sets import SetBuilder
from tests.variants.test_sets import make_labels, make_trajectory


def test_every_registered_variant_has_a_rule_and_every_rule_a_variant():
    assert set(registry.NAMES) == {v.name for v in registry.REGISTRY.values()}
    # each variant holds its rule, a function of kept.py named after it
    assert {v.rule.__name__ for v in registry.REGISTRY.values()} == {f"keep_{n}" for n in registry.NAMES}
    assert registry.REFERENCE.name in registry.NAMES and not registry.REFERENCE.question
    for v in registry.REGISTRY.values():
        assert v.card.endswith(".") and v.label
        assert v.matched_to in ("", *registry.NAMES) and v.matched_to != v.name
        if v is not registry.REFERENCE:  # the reports ask a question of every comparison
            assert v.question.endswith("?")
    assert set(registry.DEFAULT) < set(registry.NAMES)


def test_a_name_without_an_object_is_an_error_naming_the_registered_ones():
    with pytest.raises(FactoryError, match="unknown supervision variant 'shuffled'.*authors_rule"):
        registry.variant("shuffled")
    with pytest.raises(FactoryError, match="unknown supervision variant 'shuffled'"):
        SetBuilder("shuffled", 0, 17, {}, "undirected_shortest", "thought_and_answer")


def test_the_authors_rule_variant_keeps_what_the_authors_rule_keeps():
    t = make_trajectory()
    rule = authors_rule(t)["kept_triplet_ids"]
    got = select_units(t, None, registry.AUTHORS_RULE.name, 17)  # needs no labels
    assert set(got.triplet_ids) == rule and rule, "the fixture's trajectory should give the rule a path"
    answered = {x["pair_id"] for x in t["triplets"] if x["triplet_id"] in rule}
    assert set(got.pair_ids) == answered
    assert got.step_indices == steps_by_rule(t, got.pair_ids, got.triplet_ids)
    every = select_units(t, None, "unfiltered", 17)
    assert got.removed_units == len(every.triplet_ids) + len(every.pair_ids) - len(rule) - len(answered)
    # the relevance and calibration reports score the rule under the variant's name
    assert selection.AUTHORS_RULE == registry.AUTHORS_RULE.name
    # labels, when given, are checked but do not change what the rule keeps
    assert select_units(t, make_labels(t, []), registry.AUTHORS_RULE.name, 17) == got


def test_a_variant_added_as_one_object_flows_through_params_sets_and_reports(monkeypatch, tmp_path):
    """What adding a variant takes (docs/development.md#adding-a-variant): one object and its rule."""

    def first_triplet_only(trajectory, labels_row, seed):
        pairs, triplets = kept.all_units(trajectory)
        return kept._kept(trajectory, pairs, triplets, set(), set(triplets[:1]))

    toy = registry.Variant(
        name="first_triplet",
        rule=first_triplet_only,
        needs_labels=False,
        card="Only the first triplet of each trajectory.",
        label="first triplet",
        question="Does backtracing beat keeping the first triplet?",
    )
    monkeypatch.setitem(registry.REGISTRY, toy.name, toy)
    monkeypatch.setattr(registry, "NAMES", (*registry.NAMES, toy.name))

    params = load_params(None, ["bootstrap.variants=[backtrace, first_triplet]"])
    assert params.bootstrap.variants == ["backtrace", "first_triplet"]
    t = make_trajectory()
    builder = SetBuilder(toy.name, 0, 17, {}, "undirected_shortest", "thought_and_answer")
    examples = builder.add([t])
    assert examples and isinstance(builder.kept[t["trajectory_id"]], Selection)
    assert builder.kept[t["trajectory_id"]].triplet_ids == (t["triplets"][0]["triplet_id"],)

    monkeypatch.chdir(tmp_path)
    summary = build_summary(params.bootstrap)  # no metrics on disk: the verdict says so, with the question
    verdict = summary["verdicts"]["backtrace_vs_first_triplet"]
    assert verdict["question"] == toy.question and verdict["control"] == toy.name


def test_the_random_rule_matches_the_variant_its_object_names(monkeypatch):
    """``matched_to`` is the random rule's parameter: matched to another variant, it removes as many
    units per trajectory as that variant removes (here: unfiltered, which removes none)."""
    t = make_trajectory()
    row = make_labels(t, [x["triplet_id"] for x in t["triplets"][:1]])
    to_backtrace = select_units(t, row, "random", 17)
    assert to_backtrace.removed_units == select_units(t, row, "backtrace", 17).removed_units > 0
    loose = registry.Variant(**{**registry.RANDOM.__dict__, "name": "random_all", "matched_to": "unfiltered"})
    monkeypatch.setitem(registry.REGISTRY, loose.name, loose)
    got, every = select_units(t, row, loose.name, 17), select_units(t, row, "unfiltered", 17)
    assert (got.triplet_ids, got.pair_ids, got.removed_units) == (every.triplet_ids, every.pair_ids, 0)
