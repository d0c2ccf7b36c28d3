"""The API the decontamination stage calls: rows from Question rows and evaluation files, the rules it turns
on, which match it is given when several hold, and results that do not depend on how the pool is batched."""

from __future__ import annotations

import json
import random

import pytest

from factory.decontamination.eval_sets import EvalSet, file_rows
from factory.decontamination.index import EvalIndex, Match
from factory.decontamination.rows import eval_row, pool_row, titles_of
from factory.names import check_names
from factory.params.config import Params, validate_params
from factory.params.data_sections import DecontaminationParams
from factory.utils.errors import FactoryError
from factory.utils.text import normalize_question


def _eval(eval_set: str, eval_id: str, question: str, answer: str = "Paris", titles=("A", "B")) -> dict:
    return {
        "eval_set": eval_set,
        "eval_id": eval_id,
        "dataset": "hotpotqa",
        "question_norm": normalize_question(question),
        "answers": [answer],
        "titles": list(titles),
    }


def _pool(question: str, answer: str = "Paris", titles=("A", "B"), qid: str = "p") -> dict:
    return {
        "question_id": qid,
        "source_id": qid,
        "dataset": "hotpotqa",
        "question_norm": normalize_question(question),
        "answers": [answer],
        "titles": list(titles),
    }


QUESTION = "What year did the director of Jaws die?"


def test_titles_of_gives_each_supporting_title_once_in_order():
    row = {
        "supporting": [
            {"title": "B", "sent_idx": 0},
            {"title": "A", "sent_idx": 2},
            {"title": "B", "sent_idx": 1},
        ]
    }
    assert titles_of(row) == ["B", "A"]


def test_the_rules_in_params_are_the_only_ones_applied():
    rows = [_eval("dev", "1", QUESTION), _eval("dev", "2", "Who founded the city where Jaws premiered?")]
    pool = [
        _pool("WHAT YEAR did the director of Jaws die"),  # exact
        _pool("What year did the directr of Jaws die?"),  # near duplicate (a typo)
        _pool("Which answer connects A and B?"),  # same chain (answer Paris over titles A, B)
    ]
    for rules, expected in [
        (["exact"], ["exact", None, None]),
        (["near_duplicate"], [None, "near_duplicate", None]),
        (["same_chain"], ["same_chain", "same_chain", "same_chain"]),
        (["exact", "near_duplicate", "same_chain"], ["exact", "near_duplicate", "same_chain"]),
    ]:
        found = EvalIndex(rows, DecontaminationParams(rules=rules)).match(pool)
        assert [m.rule if m else None for m in found] == expected, rules


def test_the_strongest_rule_is_chosen_then_the_first_eval_set_and_id():
    rows = [
        _eval("dev", "9", "Which answer connects A and B?"),  # the same chain (answer Paris over A, B)
        _eval("dev", "5", "What year did the directr of Jaws die?", answer="1975"),  # a near duplicate
        _eval("b-set", "3", QUESTION, answer="1999", titles=("X",)),  # exact, in two sets
        _eval("a-set", "7", QUESTION, answer="1999", titles=("X",)),
    ]
    for order in (rows, rows[::-1]):
        index = EvalIndex(order, DecontaminationParams())
        found = index.matches([_pool(QUESTION)])[0]
        assert [(m.rule, m.eval_set, m.eval_id) for m in found] == [
            ("exact", "a-set", "7"),
            ("exact", "b-set", "3"),
            ("near_duplicate", "dev", "5"),
            ("same_chain", "dev", "9"),
        ]
        assert index.match([_pool(QUESTION)]) == [Match("exact", 1.0, "a-set", "7")]


def test_the_chosen_match_does_not_depend_on_the_order_of_the_evaluation_rows(eval_rows, cases):
    pool = [c.row for c in cases[::5]]
    shuffled = list(eval_rows)
    random.Random(3).shuffle(shuffled)
    a = EvalIndex(eval_rows, DecontaminationParams()).match(pool)
    b = EvalIndex(shuffled, DecontaminationParams()).match(pool)
    assert a == b and sum(m is not None for m in a) > len(pool) / 2


def test_the_matches_do_not_depend_on_the_batch_size(eval_rows, cases, index):
    pool = [c.row for c in cases[::4]]
    whole = index.matches(pool)
    small = EvalIndex(eval_rows, DecontaminationParams(batch_size=7))
    assert small.matches(pool) == whole
    # nor on how the caller cuts the pool into calls
    assert [
        m for start in range(0, len(pool), 333) for m in index.matches(pool[start : start + 333])
    ] == whole


def _read(dataset: str, path) -> tuple[list[dict], EvalSet]:
    eval_set = EvalSet(f"{dataset}/{path.name}", dataset, str(path), "decontamination.eval_sets")
    return list(file_rows(eval_set)), eval_set


def test_a_dev_file_reads_as_the_eval_rows_of_its_ingested_questions(corpora, dev):
    rows, eval_set = _read("musique", corpora / "musique" / "dev_sample.jsonl")
    expected = [eval_row(q) for q in dev if q["dataset"] == "musique"]
    assert [{k: v for k, v in r.items() if k != "question"} for r in rows] == expected
    assert (eval_set.questions, eval_set.text_only, eval_set.unreadable) == (len(expected), 0, 0)
    assert {r["eval_set"] for r in rows} == {"musique/dev_sample.jsonl"}


def test_a_record_ingest_would_refuse_is_still_checked_by_its_text(tmp_path, corpora):
    """An evaluation question with a broken field is still an evaluation question: kept by its text (no
    titles for the same-chain rule); one without a question text is counted unreadable."""
    records = json.loads((corpora / "hotpotqa" / "dev_sample.json").read_text())[:4]
    records[1]["supporting_facts"] = [["no such title", 0]]
    records[2].pop("question")
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(records))
    rows, eval_set = _read("hotpotqa", path)
    assert [r["eval_id"] for r in rows] == [records[i]["_id"] for i in (0, 1, 3)]
    assert rows[1]["titles"] == [] and rows[1]["answers"] == [records[1]["answer"]]
    assert (eval_set.questions, eval_set.text_only, eval_set.unreadable) == (3, 1, 1)


def test_pool_rows_keep_what_the_rules_read(dev):
    row = pool_row(dev[0])
    assert row["question_norm"] == dev[0]["question_norm"] and row["titles"] == titles_of(dev[0])
    assert row["answers"] == dev[0]["answers"] and row["question_id"] == dev[0]["question_id"]


def test_the_params_section_sits_after_splits_and_refuses_an_unknown_rule():
    assert list(Params.model_fields).index("decontamination") == list(Params.model_fields).index("splits") + 1
    assert Params().decontamination.rules == ["exact", "near_duplicate", "same_chain"]
    for rules in (["fuzzy"], []):
        with pytest.raises(FactoryError, match="decontamination.rules"):
            validate_params({"decontamination": {"rules": rules}})
    with pytest.raises(FactoryError, match="decontamination.eval_sets"):  # names: when a command loads them
        check_names(validate_params({"decontamination": {"eval_sets": {"squad": ["dev.json"]}}}))
