"""Constrained decoding on the local backend (llguidance on CPU), with the tiny random-weight model: whatever
the weights, a constrained reply is in its grammar; unconstrained rows of the same batch are untouched."""

from __future__ import annotations

import re

import pytest

from factory.agent import prompts
from factory.agent.loop import step_constraints
from factory.llm.base import ChatRequest, Sampling
from factory.llm.cache import cache_key
from factory.llm.local import LocalLLM
from factory.params.agent_sections import LLMParams

QUESTION = "Were Scott Derrickson and Ed Wood of the same nationality?"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def llm(tiny_model_dir):
    model = LocalLLM(LLMParams(model=str(tiny_model_dir), device="cpu", batch_size=8, dtype="float32"))
    yield model
    model.close()


def _messages(version: str, kind: str) -> list[dict]:
    if kind == "explore":
        return prompts.explore_messages(version, QUESTION, [("Scott Derrickson", "nationality", "American")])
    if kind == "complete":
        passages = [("Ed Wood", "Edward Davis Wood Jr. was an American filmmaker.")]
        return prompts.complete_messages(version, QUESTION, "Ed Wood", "nationality", passages, 200)
    return prompts.final_messages(version, QUESTION, [("Ed Wood", "nationality", "American")])


@pytest.mark.parametrize("version", ["knowtrace-v1", "knowtrace-json-v1"])
def test_constrained_replies_are_in_the_grammar_and_parse(llm, version):
    constraints = step_constraints(version, 2)
    fmt = prompts.output_format(version)
    stop = prompts.prompt_set(version).stop
    requests = [
        ChatRequest.of(
            _messages(version, kind),
            Sampling(temperature=t, max_new_tokens=400, seed=3, stop=stop),
            k,
            constraints[kind],
        )
        for kind in ("explore", "complete", "final")
        for t, k in ((0.0, 0), (1.0, 0), (1.0, 1))
    ]
    out = llm.generate(requests)
    finished = 0
    for request, response in zip(requests, out):
        assert response.ok, response.error
        if response.finish_reason == "length":  # the budget ran out inside a field: nothing to check
            continue
        finished += 1
        kind = request.constraint.name.split("/")[1]
        assert re.fullmatch(request.constraint.regex, response.text), (kind, response.text)
        getattr(fmt, f"parse_{kind}")(response.text)  # never a ParseError
    assert finished >= 6
    free = llm.generate([ChatRequest(r.messages, r.sampling, r.sample) for r in requests])
    assert (
        sum(re.fullmatch(r.constraint.regex, f.text) is not None for r, f in zip(requests, free)) < finished
    )


def test_unconstrained_rows_of_a_mixed_batch_are_untouched(llm):
    constraints = step_constraints("knowtrace-v1", 2)
    greedy = Sampling(max_new_tokens=24)
    plain = [ChatRequest.of(_messages("knowtrace-v1", k), greedy) for k in ("explore", "complete", "final")]
    alone = llm.generate(plain)
    mixed = llm.generate(
        [plain[0], ChatRequest(plain[1].messages, greedy, 0, constraints["complete"]), plain[2]]
    )
    assert [mixed[0].text, mixed[2].text] == [alone[0].text, alone[2].text]  # fp32: batch-invariant
    assert mixed[1].text != alone[1].text and re.match(r"\(|N", mixed[1].text)


def test_a_constraint_is_part_of_the_cache_key():
    c = step_constraints("knowtrace-json-v1", 2)
    messages = (("user", "q"),)
    plain = ChatRequest(messages, Sampling())
    keys = {
        cache_key("local", "m", plain),
        cache_key("local", "m", ChatRequest(messages, Sampling(), 0, c["explore"]), "local:llguidance"),
        cache_key("local", "m", ChatRequest(messages, Sampling(), 0, c["final"]), "local:llguidance"),
        cache_key("openai", "m", ChatRequest(messages, Sampling(), 0, c["final"]), "openai:grammar"),
        cache_key("openai", "m", ChatRequest(messages, Sampling(), 0, c["final"]), "openai:response_format"),
    }
    assert len(keys) == 5
    # requests without a constraint keep the keys they always had (old cache entries stay valid):
    # this digest is what the cache of the previous release computed for the same request
    assert (
        cache_key("local", "m", plain) == "601991810bfd9c19ac2fbc86511847f9e3258da4aa932259083a619d2d79cd49"
    )
