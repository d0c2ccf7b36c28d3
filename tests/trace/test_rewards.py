"""TRACE reward functions on hand-written completions: every branch of every rule."""

from __future__ import annotations

import pytest

from factory.params.config import load_params
from factory.params.round_sections import TraceParams
from factory.trace.rewards import (
    TraceOutput,
    accuracy_reward,
    bonus_reward,
    format_problem,
    format_reward,
    make_reward_functions,
    parse_index_list,
    parse_trace,
    relevance_reward,
    trace_reward,
)
from factory.utils.errors import FactoryError

GOOD = (
    "<relevance>[1, 3]</relevance>\n<analysis>Ed Wood (nationality): American [1]. Scott Derrickson "
    "(nationality): American [3].</analysis>\n<answer>yes</answer>"
)


def trace(relevance: str = "[1, 3]", analysis: str = "X (y): z [1].", answer: str = "yes") -> str:
    return f"<relevance>{relevance}</relevance><analysis>{analysis}</analysis><answer>{answer}</answer>"


def rewards(fn, completions, answers=("yes",), indices=(1, 3), **kw):
    n = len(completions)
    return fn(completions, gold_answers=[list(answers)] * n, gold_relevant_indices=[list(indices)] * n, **kw)


# ---------------------------------------------------------------- format


@pytest.mark.parametrize(
    "text, why",
    [
        ("<relevance>[1]</relevance><analysis>a [1]</analysis>", "<answer> appears 0 times"),  # missing tag
        ("<analysis>a</analysis><relevance>[1]</relevance><answer>b</answer>", "out of order"),  # wrong order
        ("<relevance>[1]</relevance><answer>b</answer><analysis>a</analysis>", "out of order"),
        ("Sure! " + trace(), "outside"),  # extra text before
        (trace() + " Hope this helps.", "outside"),  # extra text after
        ("<relevance>[1]</relevance> so <analysis>a</analysis><answer>b</answer>", "outside"),  # between tags
        (trace(relevance="1, 3"), "index list"),  # no brackets
        (trace(relevance="[1, two]"), "index list"),  # not integers
        (trace(relevance="[1, 3,]"), "index list"),  # trailing comma
        (trace(relevance="[-1]"), "index list"),  # sign
        (trace(relevance="[1.5]"), "index list"),
        (trace(relevance="[1, 1]"), "twice"),  # duplicates
        (trace() + "<answer>no</answer>", "2 times"),  # a tag repeated
        (trace(analysis="  "), "empty"),
        (trace(answer=""), "empty"),
        ("<relevance>[1]<analysis>a</analysis></relevance><answer>b</answer>", "out of order"),  # nesting
        (
            "<Relevance>[1]</Relevance><analysis>a</analysis><answer>b</answer>",
            "<relevance> appears 0",
        ),  # case
        ("", "0 times"),
    ],
)
def test_format_zero_with_reason(text, why):
    assert format_reward([text]) == [0.0]
    assert parse_trace(text) is None
    problem = format_problem(text)
    assert problem is not None and why in problem


@pytest.mark.parametrize(
    "text",
    [
        GOOD,
        trace(relevance="[]"),  # empty index list: well formed (relevance then gives 0)
        trace(relevance="[ 2 ,4 ]"),
        trace(relevance="[99]"),  # out of range is not a format error
        "\n  " + trace() + "\n\n",  # surrounding whitespace is fine
    ],
)
def test_format_one(text):
    assert format_reward([text]) == [1.0]


def test_parse_trace_fields():
    out = parse_trace(GOOD)
    assert out == TraceOutput(relevance=(1, 3), analysis=out.analysis, answer="yes")
    assert out.analysis.startswith("Ed Wood (nationality)")
    assert (
        parse_index_list("[]") == []
        and parse_index_list("[3, 1]") == [3, 1]
        and parse_index_list("3") is None
    )


# ---------------------------------------------------------------- accuracy


def test_accuracy_rules():
    completions = [
        trace(answer="The Yes."),  # normalisation: case, punctuation, articles
        trace(answer="no"),  # yes/no are compared as strings: wrong
        "<answer>yes</answer>",  # format broken but the answer block is read
        "yes",  # no answer block
        trace() + "<answer>yes</answer>",  # two answer blocks: ambiguous
        trace(answer="   "),
    ]
    assert rewards(accuracy_reward, completions) == [1.0, 0.0, 1.0, 0.0, 0.0, 0.0]


def test_accuracy_aliases():
    golds = ["United States of America", "USA", "the United States"]
    out = accuracy_reward(
        [trace(answer="usa"), trace(answer="United States"), trace(answer="America")],
        gold_answers=[golds] * 3,
        gold_relevant_indices=[[1]] * 3,
    )
    assert out == [1.0, 1.0, 0.0]


# ---------------------------------------------------------------- relevance


def test_relevance_rules():
    completions = [
        trace(relevance="[3, 1]"),  # equal sets (order irrelevant)
        trace(relevance="[1]"),  # overlap, subset
        trace(relevance="[1, 2, 3]"),  # overlap, superset
        trace(relevance="[2, 4]"),  # disjoint
        trace(relevance="[]"),  # empty
        trace(relevance="[1, 3, 9]"),  # out of range index = a wrong index
        trace(relevance="[0, 1, 3]"),  # 0 is out of range (1-based)
        trace(relevance="[1, 1, 3]"),  # duplicates count once for relevance (format is 0)
        trace(relevance="1, 3"),  # malformed
        "<analysis>a</analysis><answer>yes</answer>",  # missing relevance
    ]
    assert rewards(relevance_reward, completions) == [1.0, 0.5, 0.5, 0.0, 0.0, 0.5, 0.5, 1.0, 0.0, 0.0]
    assert format_reward([completions[7]]) == [0.0]


def test_relevance_empty_gold_gives_zero():
    assert rewards(relevance_reward, [trace(relevance="[]"), trace(relevance="[1]")], indices=()) == [
        0.0,
        0.0,
    ]


# ---------------------------------------------------------------- bonus and total


def test_bonus_and_trace_reward():
    completions = [
        GOOD,  # all perfect
        trace(relevance="[1]"),  # relevance 0.5
        trace(answer="no"),  # wrong answer
        "Answer: " + trace(),  # format broken
    ]
    assert rewards(bonus_reward, completions) == [10.0, 0.0, 0.0, 0.0]
    assert rewards(bonus_reward, completions, bonus_weight=3) == [3.0, 0.0, 0.0, 0.0]
    assert rewards(trace_reward, completions) == [13.0, 2.5, 2.0, 2.0]
    weighted = rewards(trace_reward, completions, weights={"format": 0.5, "relevance": 2.0}, bonus_weight=0)
    assert weighted == [3.5, 2.5, 2.5, 3.0]


def test_chat_message_input():
    as_chat = [
        [{"role": "assistant", "content": GOOD}],
        [{"role": "assistant", "content": [{"type": "text", "text": GOOD}]}],
        [{"role": "user", "content": GOOD}],  # no assistant message: nothing to score
    ]
    assert rewards(format_reward, as_chat) == [1.0, 1.0, 0.0]
    assert rewards(trace_reward, as_chat) == [13.0, 13.0, 0.0]


def test_extra_trl_kwargs_ignored_and_missing_columns_named():
    out = format_reward([GOOD], prompts=["p"], completion_ids=[[1]], trainer_state=None, dataset=["hotpotqa"])
    assert out == [1.0]
    with pytest.raises(FactoryError, match="gold_answers"):
        accuracy_reward([GOOD], gold_relevant_indices=[[1]])
    with pytest.raises(FactoryError, match="gold_relevant_indices"):
        relevance_reward([GOOD], gold_answers=[["yes"]])
    with pytest.raises(FactoryError, match="2 values for 1"):
        accuracy_reward([GOOD], gold_answers=[["yes"], ["no"]])
    with pytest.raises(FactoryError, match="expected a list"):
        accuracy_reward([GOOD], gold_answers=["yes"])


def test_make_reward_functions_for_trl():
    funcs = make_reward_functions(TraceParams(bonus_weight=5.0))
    assert [f.__name__ for f in funcs] == [
        "format_reward",
        "accuracy_reward",
        "relevance_reward",
        "trace_bonus",
    ]
    kw = {"gold_answers": [["yes"]], "gold_relevant_indices": [[1, 3]]}
    assert [f([GOOD], **kw)[0] for f in funcs] == [1.0, 1.0, 1.0, 5.0]
    (total,) = make_reward_functions(
        TraceParams(bonus_weight=5.0, reward_weights={"accuracy": 2.0}), combined=True
    )
    assert total([GOOD], **kw) == [9.0]
    with pytest.raises(FactoryError, match=r"trace\.reward_weights\.bonus"):
        load_params(None, ["trace.reward_weights={bonus: 1.0}"])
