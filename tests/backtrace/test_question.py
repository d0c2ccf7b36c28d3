"""Entities of a question: proper spans first, capitalised runs linked when unambiguous."""

from __future__ import annotations

from factory.backtrace.labels import backtrace
from factory.backtrace.linking import Linker
from factory.backtrace.question import question_entities
from factory.params.label_sections import BacktraceParams


def lk(*names: str) -> Linker:
    return Linker.from_names(names)


def test_common_nouns_of_the_question_are_left_out_when_a_name_is_found():
    linker = lk("Euro", "Signmark", "country", "currency", "Finland")
    q = "What currency predated the Euro in the country Signmark is from?"
    assert question_entities(q, linker) == ["signmark", "euro"]  # longest first, no 'country'/'currency'


def test_lower_case_question_keeps_every_match():
    linker = lk("euro", "country")
    assert sorted(question_entities("which country uses the euro", linker)) == ["country", "euro"]


def test_digits_count_as_proper_but_a_lone_number_is_not_specific():
    linker = lk("26th Chess Olympiad", "2010", "Genoa")
    q = "What amount of TEUs did the location where the 26th Chess Olympiad occur handle in 2010?"
    assert question_entities(q, linker) == ["26th chess olympiad"]  # '2010' is a year, not a name


def test_capitalised_runs_link_by_containment_or_fuzzy_when_unambiguous():
    linker = lk("Jonathan Douglass Reid", "Nashville", "1906 Summer Olympics", "2018 Winter Olympics")
    q = "Which state has the birthplace of Jonathan Reid as its capital?"
    assert question_entities(q, linker) == ["jonathan douglass reid"]  # fuzzy subset through strong tokens
    # 'Olympics' is inside two nodes: ambiguous, no initial entity from it
    assert question_entities("When were the Olympics held in Nashville?", linker) == ["nashville"]


def test_first_word_is_no_proper_signal():
    linker = lk("Film", "Paris")
    assert question_entities("Film shot where, Paris?", linker) == ["paris"]


def test_question_case_param_switches_the_rule_off():
    traj = {
        "trajectory_id": "t",
        "question": "What currency predated the Euro in the country Signmark is from?",
        "answers": ["Finnish markka"],
        "steps": [{"index": 0, "kind": "complete", "output": "", "pairs": []}],
        "triplets": [
            {
                "triplet_id": "a",
                "step_index": 0,
                "subject": "Signmark",
                "relation": "from",
                "object": "Finland",
            },
            {
                "triplet_id": "b",
                "step_index": 0,
                "subject": "Finnish markka",
                "relation": "currency of",
                "object": "Finland",
            },
            {
                "triplet_id": "c",
                "step_index": 0,
                "subject": "currency",
                "relation": "issued by",
                "object": "country",
            },
        ],
    }
    on = backtrace(traj, BacktraceParams(target_mode="gold_answer"))
    off = backtrace(traj, BacktraceParams(target_mode="gold_answer", question_case=False))
    assert on["initial_entities"] == ["signmark"] and on["kept_triplet_ids"] == ["a", "b"]
    assert off["initial_entities"] == ["country", "currency", "signmark"]
