"""The entailment judge: frozen prompt, tolerant verdicts, scripted yes/no answers from the mock server,
its cache, its agreement figure, and gold relevance under both definitions."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from factory.params.config import Params
from factory.relevance import entailment as ent
from factory.relevance.entailment_report import entailment_result, render_entailment_markdown
from factory.relevance.grounded import ENTAILED
from factory.utils import paths
from factory.utils.selection import BACKTRACE, UNFILTERED
from schemas import read_rows, write_parquet
from tests.mock_openai_server import FaultPlan, MockOpenAIServer
from tests.relevance.test_check import PASSAGES, SQ, _case, _check, _vals

KEY_ENV = "FACTORY_TEST_JUDGE_KEY"

# A registered judge prompt never changes: its text is in every cache key and behind every stored verdict.
# A deliberate change is a new version with a new name (and a new entry here).
FROZEN_DIGESTS = {"entailment-v1": "ebd00ccac7204647df8f5441015b8e5121b1dbb25fca633cf6ddbd428ee6f5a4"}


def _rendered(version: str) -> str:
    return json.dumps(
        ent.judge_messages(version, "<subject>", "<relation>", "<object>", "<title>", "<passage> " * 5, 1500)
    )


@pytest.mark.parametrize("version", sorted(ent.JUDGE_PROMPTS))
def test_registered_judge_prompts_are_frozen(version):
    assert version in FROZEN_DIGESTS, f"new judge prompt {version!r}: add its digest to FROZEN_DIGESTS"
    assert hashlib.sha256(_rendered(version).encode()).hexdigest() == FROZEN_DIGESTS[version], (
        f"judge prompt {version!r} renders differently than when it was frozen; register a new version"
    )


def test_unknown_prompt_version_is_a_clear_error():
    with pytest.raises(Exception, match="entailment-v1"):
        ent.judge_prompt("nope")


def test_few_shot_examples_parse_and_show_the_relation_blind_case():
    system = ent.JUDGE_PROMPTS["entailment-v1"].system
    replies = re.findall(r"Output: (.*)", system)
    assert [ent.parse_verdict(r)[0] for r in replies] == [True, False, True, False]
    assert "(Scott Derrickson ; married to ; 1966)" in system


@pytest.mark.parametrize(
    "reply, verdict",
    [
        ("yes: the passage says so", (True, "the passage says so")),
        ("No. It is his birth year.", (False, "It is his birth year.")),
        ("**Yes**", (True, "judge said yes")),
        ("Answer: no - different relation", (False, "different relation")),
        ("\n- YES: stated\nmore text", (True, "stated")),
    ],
)
def test_verdicts_are_parsed_tolerantly(reply, verdict):
    assert ent.parse_verdict(reply) == verdict


def test_unreadable_replies_give_no_verdict():
    for reply in ("", "maybe", "The passage, yes, mentions it"):
        entailed, reason = ent.parse_verdict(reply)
        assert entailed is None and reason.startswith("unreadable judge reply")


def test_judge_backend_falls_back_to_llm_settings():
    params = Params(llm={"backend": "openai", "model": "policy", "base_urls": ["http://a/v1"]})
    same = ent.judge_llm_params(params)
    assert (same.backend, same.model, same.base_urls) == ("openai", "policy", ["http://a/v1"])
    params.grounding.llm.model = "big-judge"
    params.grounding.llm.base_urls = ["http://judge/v1"]
    params.grounding.llm.api_key_env = "JUDGE_KEY"
    other = ent.judge_llm_params(params)
    assert (other.model, other.base_urls, other.api_key_env) == (
        "big-judge",
        ["http://judge/v1"],
        "JUDGE_KEY",
    )
    assert other.concurrency == params.llm.concurrency and params.llm.model == "policy"


def script_yes_for(relations: set[str]):
    """The mock judge: yes when the triplet's relation is in ``relations``, else no."""

    def script(messages, model):
        triplet = re.search(r"Triplet: \((.*?) ; (.*?) ; (.*?)\)\n", messages[-1]["content"])
        return "yes: stated" if triplet and triplet.group(2) in relations else "no: not stated"

    return script


def _judge_params(server, monkeypatch) -> Params:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    params = Params(grounding={"judge": "llm"})
    params.grounding.llm.backend = "openai"
    params.grounding.llm.model = "mock-model"
    params.grounding.llm.base_urls = [server.base_url]
    params.grounding.llm.api_key_env = KEY_ENV
    params.grounding.llm.max_retries = 1
    params.llm.backoff_s = 0.01
    return params


def test_judge_on_scripted_answers_caches_and_agrees(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trajectories, labels = _case()
    from factory.relevance.check import Source

    sources = [Source("backtrace/seed_0/round_1", trajectories, labels)]
    questions = {t["question_id"]: {"supporting": [{"pid": "g1"}, {"pid": "g2"}]} for t in trajectories}
    with MockOpenAIServer(script=script_yes_for({"born in", "located in", "flows in"})) as server:
        params = _judge_params(server, monkeypatch)
        rows, verdicts, summary = ent.judge_sources(sources, questions, PASSAGES, params)
        calls = server.state.completions
        # correct trajectories A, B, C: grounded triplets A t1-t4, B t1-t2, C t1 (A's made-up one is not)
        assert [(r["trajectory_id"], r["triplet_id"]) for r in rows] == [
            ("A", "A#t1"),
            ("A", "A#t2"),
            ("A", "A#t3"),
            ("A", "A#t4"),
            ("B", "B#t1"),
            ("B", "B#t2"),
            ("C", "C#t1"),
        ]
        assert calls == 4  # one call per distinct (passage, triplet): BORN, CHESS, CITY, RIVER
        assert [r["entailed"] for r in rows] == [True, False, True, True, True, True, True]
        assert rows[1]["reason"] == "not stated" and rows[0]["judge"].startswith("openai:mock-model")
        assert verdicts[("A", "A#t2")] is False and ("A", "A#t5") not in verdicts
        agree = summary["agreement_with_lexical"]
        assert agree["all"] == {
            "judged": 7,
            "entailed": 6,
            "not_entailed": 1,
            "no_verdict": 0,
            "agreement": pytest.approx(6 / 7),
        }
        # gold paragraphs g1, g2: every row but the two RIVER ones (d1)
        assert agree["gold_paragraph"]["judged"] == 5 and agree["gold_paragraph"][
            "agreement"
        ] == pytest.approx(4 / 5)
        assert summary["llm_calls"] == {"triplets_judged": 7, "calls": 4}
        again, _, summary = ent.judge_sources(sources, questions, PASSAGES, params)
        assert server.state.completions == calls  # the second run is answered by the cache
        assert again == rows
        assert summary["llm_calls"] == {"triplets_judged": 7, "calls": 4}  # the same figure, from the cache


def test_failed_calls_give_no_verdict_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    trajectories, labels = _case()
    from factory.relevance.check import Source

    with MockOpenAIServer(faults=FaultPlan(permanent_rate=1.0)) as server:
        params = _judge_params(server, monkeypatch)
        rows, verdicts, summary = ent.judge_sources(
            [Source("s", trajectories[:1], labels[:1])], {}, PASSAGES, params
        )
    assert rows and all(r["entailed"] is None and r["reason"].startswith("judge call failed") for r in rows)
    assert summary["agreement_with_lexical"]["all"]["agreement"] is None
    write_parquet(rows, paths.ENTAILMENT, "entailment")  # the contract holds nulls
    assert read_rows(paths.ENTAILMENT)[0]["entailed"] is None


def test_lexical_judge_makes_no_call():
    rows, verdicts, summary = ent.judge_sources([], {}, {}, Params())
    assert (
        rows == []
        and verdicts is None
        and summary == {"judge": "lexical", "prompt_version": None, "judge_model": None}
    )


def test_both_gold_relevance_definitions_by_hand():
    trajectories, labels = _case()
    verdicts = {
        ("A", "A#t1"): True,
        ("A", "A#t2"): False,
        ("A", "A#t3"): True,
        ("A", "A#t4"): True,
        ("B", "B#t1"): True,
        ("B", "B#t2"): True,
        ("C", "C#t1"): None,
    }
    res = _check(trajectories, labels, entailment=verdicts)
    lexical = res["groups"]["all"]["levels"]["paragraph"]["methods"]
    review = res["groups"]["all"]["levels"][ENTAILED]["methods"]
    # lexical: as in test_check (A relevant t1,t2,t3; B t1; C t1)
    assert _vals(lexical[SQ]["micro"]) == pytest.approx(
        {"precision": 3 / 4, "recall": 3 / 5, "f1": 2 * 3 / 9}
    )
    # review: A's CHESS is not entailed, C's BORN has no verdict -> relevant A {t1,t3}, B {t1}, C {}
    assert _vals(review[SQ]["micro"]) == pytest.approx({"precision": 3 / 4, "recall": 1.0, "f1": 6 / 7})
    assert _vals(review[UNFILTERED]["micro"]) == pytest.approx(
        {"precision": 3 / 8, "recall": 1.0, "f1": 6 / 11}
    )
    assert ENTAILED not in _check(trajectories, labels)["groups"]["all"]["levels"]  # no verdicts: no level


def test_report_section_gives_both_definitions_and_the_agreement():
    trajectories, labels = _case()
    verdicts = {("A", "A#t1"): True, ("A", "A#t2"): False, ("A", "A#t3"): True, ("B", "B#t1"): True}
    res = _check(trajectories, labels, entailment=verdicts)
    summary = {
        "judge": "llm",
        "prompt_version": "entailment-v1",
        "judge_model": "openai:judge",
        "agreement_with_lexical": {
            "all": {"judged": 4, "entailed": 3, "not_entailed": 1, "no_verdict": 0, "agreement": 0.75}
        },
    }
    res["entailment"] = entailment_result(res, summary)
    row = res["entailment"]["by_definition"]["all"]
    assert (
        row["paragraph"][BACKTRACE]["recall"] == pytest.approx(3 / 5)
        and row[ENTAILED][BACKTRACE]["recall"] == 1.0
    )
    assert row["review_reaches_bar"] is False  # precision 3/4 < 0.8
    md = render_entailment_markdown(res)
    assert "relation-blind" in md and "review: gold paragraph AND entailed" in md and "| 0.75 |" in md
    assert "do NOT reach the 0.8 bar" in md
    lexical = render_entailment_markdown({"entailment": {"judge": "lexical"}})
    assert "relation-blind" in lexical and "not measured" in lexical
    # an undefined precision (S_q kept nothing) is no verdict, not a failure to reach the bar
    undefined = {"precision": None, "recall": 0.5, "f1": None}
    row = {ENTAILED: {BACKTRACE: undefined, "controls_f1": dict.fromkeys(row[ENTAILED]["controls_f1"])}}
    md = render_entailment_markdown(
        {
            **res,
            "entailment": {
                **res["entailment"],
                "by_definition": {"all": {**row, "review_reaches_bar": None}},
            },
        }
    )
    assert "cannot be compared with the 0.8 bar" in md and "do NOT reach" not in md
