"""A protocol the corpora cannot hold: the pilot and full profiles on the shared samples stop, naming the
numbers and how to give the full corpora; the demo profile samples all there are and says so."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from factory.execution.sampling import check_samples, evaluation_sample, shortfalls
from factory.params.profiles import profile_params
from factory.utils.errors import FactoryError


def available(questions, split: str) -> tuple[int, str]:
    """The questions of ``split`` and their 'dataset n, ...' breakdown, counted here by hand."""
    by = Counter(q["dataset"] for q in questions if q["split"] == split)
    return sum(by.values()), ", ".join(f"{d} {n}" for d, n in sorted(by.items()))


@pytest.mark.parametrize("name", ["pilot", "full"])
def test_the_pilot_and_full_profiles_on_the_shared_samples_stop_naming_both_numbers(name, ingested):
    params = profile_params(name)
    with pytest.raises(FactoryError) as exc:
        check_samples(params, ingested.questions)
    message = str(exc.value)
    named = []
    for split, word, section in (
        ("train", "training", "trajectories"),
        ("heldout", "held-out", "evaluate"),
        ("test", "test", "evaluate"),
    ):
        asked = getattr(params, section).n_questions
        n, by = available(ingested.questions, split)
        line = f"asked {asked} {word} questions ({section}.n_questions), {n} available ({by})"
        assert (line in message) == (asked > n)
        named += [section] if asked > n else []
    assert "held-out" in message  # the shared samples hold 24 held-out questions: both profiles ask more
    # what to do: the full corpora (the corpora key, where they come from), fewer, or allow_fewer
    assert "corpora.hotpotqa=[/data/corpora/hotpot_train_v1.1.json," in message
    assert "docs/corpora.md" in message
    assert " and ".join(f"{s}.allow_fewer=true" for s in dict.fromkeys(named)) + "." in message
    assert "\n" not in message


def test_the_demo_profile_samples_all_there_are_and_says_so(ingested, caplog):
    params = profile_params("demo", ["evaluate.n_questions=500"])
    heldout, _ = available(ingested.questions, "heldout")
    with caplog.at_level(logging.WARNING, logger="factory.execution.sampling"):
        found = check_samples(params, ingested.questions)
    assert [(s.split, s.asked, sum(s.available.values())) for s in found] == [("heldout", 500, heldout)]
    assert f"asked 500 held-out questions (evaluate.n_questions), {heldout} available" in caplog.text
    chosen, _ = evaluation_sample(params, ingested.questions, "heldout")
    assert len(chosen) == heldout  # all of them


def test_a_sample_the_split_holds_is_no_shortfall_and_only_the_named_splits_are_checked(ingested):
    full = profile_params("full")
    assert shortfalls(full, ingested.questions, ["test"]) == []  # 500 of the dev samples' test questions
    assert [s.split for s in shortfalls(full, ingested.questions, ["train"])] == ["train"]
    # training questions come from trajectories.datasets only
    only = profile_params("full", ["trajectories.n_questions=100", "trajectories.datasets=[musique]"])
    musique, _ = available([q for q in ingested.questions if q["dataset"] == "musique"], "train")
    assert [(s.asked, s.available) for s in shortfalls(only, ingested.questions, ["train"])] == [
        (100, {"musique": musique})
    ]
