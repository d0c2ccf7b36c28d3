"""Prompt templates: versioned, few-shot outputs in the parser's formats, hint and repair handling."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from factory.agent import prompts
from factory.agent.format import parse_complete, parse_explore, parse_final
from factory.params.agent_sections import AgentParams
from factory.utils.errors import FactoryError

V1 = "knowtrace-v1"


def _example_outputs(system: str) -> list[str]:
    return [m.strip() for m in re.findall(r"Output:\n(.*?)(?=\n\nExample \d+:|\Z)", system, flags=re.DOTALL)]


def test_default_version_exists_and_unknown_versions_fail():
    assert AgentParams().prompt_version in prompts.PROMPTS
    assert prompts.prompt_set(V1).version == V1
    with pytest.raises(FactoryError, match="knowtrace-v1"):
        prompts.prompt_set("nope")


def test_few_shot_examples_follow_the_parsed_formats():
    p = prompts.PROMPTS[V1]
    explore = _example_outputs(p.explore_system)
    assert len(explore) == 4
    parsed = [parse_explore(o) for o in explore]
    assert [x.sufficient for x in parsed] == [False, False, True, False]
    assert parsed[3].pairs == [("Eiffel Tower", "height"), ("Space Needle", "height")]
    complete = [parse_complete(o) for o in _example_outputs(p.complete_system)]
    assert complete[1] == [("Space Needle", "height", "184 m"), ("Space Needle", "location", "Seattle")]
    assert complete[2] == []  # the 'None' example
    (final,) = [parse_final(o) for o in _example_outputs(p.final_system)]
    assert final.answer == "yes"


def test_explore_prompt_shows_question_and_graph():
    empty = prompts.explore_messages(V1, "Who  wrote\nX?", [])
    assert [m["role"] for m in empty] == ["system", "user"]
    assert empty[1]["content"] == "Question: Who wrote X?\nGraph:\n(empty)"
    grown = prompts.explore_messages(V1, "Who wrote X?", [("X", "author", "Y"), ("Y", "born", "1900")])
    assert grown[1]["content"].endswith("Graph:\n(X ; author ; Y)\n(Y ; born ; 1900)")
    assert prompts.step_kind(grown) == "explore"


def test_complete_prompt_cuts_passages_at_a_word_boundary():
    text = "word " * 400
    msgs = prompts.complete_messages(
        V1, "Q?", "Ed Wood", "nationality", [("Ed Wood", text), ("Other", "short text")], passage_chars=60
    )
    user = msgs[1]["content"]
    assert "Look up: Ed Wood | nationality" in user
    first = user.split("[1] Ed Wood: ", 1)[1].split("\n", 1)[0]
    assert first.endswith(" ...") and len(first) <= 64 and "wor ..." not in first
    assert "[2] Other: short text" in user
    assert prompts.step_kind(msgs) == "complete"
    assert "(no passages found)" in prompts.complete_messages(V1, "Q?", "E", "r", [], 100)[1]["content"]


def test_hint_is_one_separable_line():
    plain = prompts.explore_messages(V1, "Q?", [])
    hinted = prompts.explore_messages(V1, "Q?", [], hint="Paris")
    assert hinted[0] == plain[0]
    assert (
        hinted[1]["content"]
        == plain[1]["content"] + '\nHint: the correct answer is "Paris". Find the facts that lead to it.'
    )
    assert "Paris" in prompts.final_messages(V1, "Q?", [], hint="Paris")[1]["content"]
    assert prompts.step_kind(prompts.final_messages(V1, "Q?", [])) == "final"


def test_repair_reasks_with_the_error_and_the_bad_output():
    base = prompts.explore_messages(V1, "Q?", [])
    first = prompts.repair_messages(V1, base, "garbage", "no 'Answer:' line")
    assert first[:2] == base and first[2] == {"role": "assistant", "content": "garbage"}
    assert "no 'Answer:' line" in first[3]["content"]
    again = prompts.repair_messages(V1, first, "garbage 2", "still bad")
    assert len(again) == 4 and again[2]["content"] == "garbage 2"  # repairs do not pile up
    assert prompts.step_kind(again) == "explore"
    assert prompts.step_kind([{"role": "user", "content": "hi"}]) is None


# A registered prompt version never changes: its text is in every cache key and every stored trajectory.
# Its few-shot examples are rendered through factory.agent.format, so an edit there would silently change
# it; this digest catches that. A deliberate change is a new version with a new name (and a new entry here).
FROZEN_DIGESTS = {
    "knowtrace-v1": "f2b15488ec8f7d061f75f7ccc5620990359bee9a54c02594b112ecf5ff07c708",
    "knowtrace-json-v1": "4b3e40326183ec2de6107154ac78dd3c30d92fd7025a741eb0c921f13265f5b1",
}


def _rendered(version: str) -> str:
    graph = [("<subject>", "<relation>", "<object>")]
    final = prompts.final_messages(version, "<question>", graph)
    rendered = {
        "explore": prompts.explore_messages(version, "<question>", graph, hint="<hint>"),
        "explore_empty": prompts.explore_messages(version, "<question>", []),
        "complete": prompts.complete_messages(
            version, "<question>", "<entity>", "<relation>", [("<title>", "<text> " * 5)], 20
        ),
        "complete_none": prompts.complete_messages(version, "<question>", "<entity>", "<relation>", [], 20),
        "final": prompts.final_messages(version, "<question>", graph, hint="<hint>"),
        "repair": prompts.repair_messages(version, final, "<bad output>", "<error>"),
        "stop": list(prompts.prompt_set(version).stop),
    }
    return json.dumps(rendered, sort_keys=True)


@pytest.mark.parametrize("version", sorted(prompts.PROMPTS))
def test_registered_prompt_versions_are_frozen(version):
    assert version in FROZEN_DIGESTS, f"new prompt version {version!r}: add its digest to FROZEN_DIGESTS"
    digest = hashlib.sha256(_rendered(version).encode()).hexdigest()
    assert digest == FROZEN_DIGESTS[version], (
        f"prompt version {version!r} renders differently than when it was frozen; "
        "register the changed prompts under a new version name instead"
    )


def test_the_json_version_shows_the_same_examples_in_its_own_syntax():
    from factory.agent import format_json
    from factory.agent.format import TEXT

    v1, js = prompts.PROMPTS[V1], prompts.PROMPTS["knowtrace-json-v1"]
    assert (
        prompts.output_format(V1) is TEXT and prompts.output_format("knowtrace-json-v1") is format_json.JSON
    )
    assert prompts.output_format(None) is TEXT and prompts.output_format("simulated-v1") is TEXT
    with pytest.raises(FactoryError, match="knowtrace-v9"):
        prompts.output_format("knowtrace-v9")
    for kind in ("explore", "complete", "final"):
        text = [getattr(TEXT, f"parse_{kind}")(o) for o in _example_outputs(getattr(v1, f"{kind}_system"))]
        as_json = [
            getattr(format_json, f"parse_{kind}")(o) for o in _example_outputs(getattr(js, f"{kind}_system"))
        ]
        assert text == as_json and text
    messages = prompts.complete_messages("knowtrace-json-v1", "Q?", "E", "r", [], 50)
    assert prompts.version_and_kind(messages) == ("knowtrace-json-v1", "complete")
    assert messages[1] == prompts.complete_messages(V1, "Q?", "E", "r", [], 50)[1]  # the same user message
