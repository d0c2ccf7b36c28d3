"""Per-trajectory grounding and the answer-entity control of the relevance check."""

from __future__ import annotations

from factory.relevance.grounded import (
    answer_entity_triplets,
    ground_for_relevance,
)
from tests.relevance.test_check import BORN, MADE_UP, PASSAGES, RIVER, _traj


def test_grounding_for_relevance_prefers_recorded_sources():
    t = _traj("A", "hotpotqa/h", [BORN, RIVER, MADE_UP])
    t["triplets"][2]["source_pid"] = "g2"  # recorded by the agent: used as is, sentence found within it
    g = ground_for_relevance(t, PASSAGES, 0.5)
    assert g == {"A#t1": ("g1", 0), "A#t2": ("d1", 0), "A#t3": ("g2", 0)}


def test_answer_entity_control_matches_whole_words():
    t = _traj(
        "A",
        "hotpotqa/h",
        [("The Gamma Ray", "is", "band"), ("Gammaville", "near", "Alpha"), ("Alpha", "born in", "gamma.")],
    )
    assert answer_entity_triplets(t) == ["A#t1", "A#t3"]
