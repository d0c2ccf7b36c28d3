"""Each rule flags the contamination built from real dev records for it, and leaves alone what is not
contamination: templated questions about other entities, other questions over the same entities."""

from __future__ import annotations

import pytest

from bench.decontamination_cases import CHAIN, EXACT, REWORDING, SURFACE
from factory.decontamination.chain import weak_answer
from factory.decontamination.index import EvalIndex
from factory.decontamination.rows import eval_set_label, pool_row
from factory.params.data_sections import DecontaminationParams
from factory.utils.text import normalize_answer, normalize_question


def _of_record(match, record: dict) -> bool:
    return (match.eval_set, match.eval_id) == (eval_set_label(record), record["source_id"])


def _share_flagged(index: EvalIndex, cases: list) -> float:
    found = index.matches([c.row for c in cases])
    return sum(any(_of_record(m, c.origin) for m in f) for c, f in zip(cases, found)) / len(cases)


def _false_positive_share(index: EvalIndex, cases: list) -> float:
    """Negatives matched with anything but the records they took an entity from."""
    found = index.matches([c.row for c in cases])
    flagged = [
        any(f"{m.eval_set.split('/')[0]}/{m.eval_id}" not in c.exclude for m in ms)
        for c, ms in zip(cases, found)
    ]
    return sum(flagged) / len(cases)


@pytest.fixture(scope="module")
def alone(eval_rows):
    """An index per rule, that rule alone on."""
    return {
        rule: EvalIndex(eval_rows, DecontaminationParams(rules=[rule]))
        for rule in ("exact", "near_duplicate", "same_chain")
    }


def test_exact_flags_case_punctuation_and_article_variants_and_nothing_else(alone, cases):
    exact = [c for c in cases if c.kind in EXACT]
    assert _share_flagged(alone["exact"], exact) == 1.0
    # an edited question is no exact match, even one letter off
    assert _share_flagged(alone["exact"], [c for c in cases if c.kind == "typo"]) == 0.0


@pytest.mark.parametrize(("kinds", "at_least"), [(SURFACE, 0.97), (REWORDING, 0.8)])
def test_near_duplicate_flags_surface_edits_and_light_rewording(alone, cases, kinds, at_least):
    # alone, on all the dev samples: 99% of surface edits, 84% of rewordings (bench/decontamination_rules.py)
    assert _share_flagged(alone["near_duplicate"], [c for c in cases if c.kind in kinds]) >= at_least


def test_near_duplicate_finds_a_misspelt_name_that_is_the_only_rare_word(alone):
    row = {
        "question_id": "p",
        "source_id": "p",
        "dataset": "2wikimultihopqa",
        "answers": ["x"],
        "titles": ["x"],
        "question_norm": normalize_question("Who is Madansinhj's paternal grandfather?"),
    }
    found = alone["near_duplicate"].match([row])[0]
    assert found is not None and found.rule == "near_duplicate"


def test_same_chain_flags_questions_rebuilt_from_the_chain(alone, cases):
    decomposition = [c for c in cases if c.kind == "from_decomposition"]
    assert decomposition and _share_flagged(alone["same_chain"], decomposition) == 1.0
    # a restatement that only names the titles keeps the chain when the answer identifies it: not yes/no, not
    # words of either question (a restatement naming the titles names a bridge answer that is a title)
    informative = [c for c in cases if c.kind in CHAIN and not _weak(c)]
    assert len(informative) > 300 and _share_flagged(alone["same_chain"], informative) == 1.0
    weak = [c for c in cases if c.kind == "templated_restatement" and _weak(c)]
    assert len(weak) > 50 and _share_flagged(alone["same_chain"], weak) <= 0.01  # the guard's price


def _weak(case) -> bool:
    answer = normalize_answer(case.origin["answers"][0])
    return weak_answer(answer, case.origin["question_norm"]) or weak_answer(answer, case.row["question_norm"])


def test_templated_real_questions_about_other_entities_are_not_flagged(index, ingested):
    templated = [
        q
        for q in ingested.questions
        if q["dataset"] == "2wikimultihopqa" or (q["dataset"] == "hotpotqa" and q["qtype"] == "comparison")
    ]
    found = index.matches([pool_row(q) for q in templated])
    others = [(q["question"], m) for q, ms in zip(templated, found) for m in ms if not _of_record(m, q)]
    assert len(templated) > 700 and others == []


def test_built_templated_questions_about_other_entities_are_not_flagged(index, cases):
    assert _false_positive_share(index, [c for c in cases if c.kind == "other_entities"]) == 0.0
    assert _false_positive_share(index, [c for c in cases if c.kind == "other_entity"]) <= 0.02


def test_the_same_chain_guard_keeps_other_questions_over_the_same_entities_apart(eval_rows, cases):
    other_question = [c for c in cases if c.kind == "other_question_same_chain"]
    unguarded = EvalIndex(eval_rows, DecontaminationParams(rules=["same_chain"], same_chain_guard=0))
    guarded = EvalIndex(eval_rows, DecontaminationParams(rules=["same_chain"]))
    # same answer, same titles: without the guard the key alone flags every one of them
    assert _false_positive_share(unguarded, other_question) == 1.0
    assert _false_positive_share(guarded, other_question) <= 0.05
