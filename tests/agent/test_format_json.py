"""The JSON syntax of knowtrace-json-v1: tolerant parsing of JSON replies, refusal of prose."""

import pytest

from factory.agent.fields import ParseError
from factory.agent.format_json import parse_complete, parse_explore, parse_final, render_explore


def test_explore_reads_the_canonical_form_and_its_variants():
    pairs = [("Scott Derrickson", "nationality"), ("Ed Wood", "nationality")]
    canonical = render_explore("need both", pairs)
    variants = [
        canonical,
        "```json\n" + canonical + "\n```",
        canonical + "\nExample 2:",  # what follows the object is not read
        '{"Thought": "need both", "Sufficient": "no", "Look Up": ["Scott Derrickson | nationality", '
        '["Ed Wood", "nationality"]]}',
        '{"thought": "need both", "pairs": [{"entity": "Scott Derrickson", "relation": "nationality"}, '
        '{"Entity": "Ed Wood", "Relation": "nationality"}, '
        '{"entity": "Ed Wood", "relation": "nationality"}]}',
    ]
    for text in variants:
        out = parse_explore(text)
        assert (out.thought, out.sufficient, out.pairs) == ("need both", False, pairs), text
    assert parse_explore(canonical, max_pairs=1).pairs == pairs[:1]
    out = parse_explore('{"thought": "both", "sufficient": true, "answer": "yes"}')
    assert out.sufficient and out.answer == "yes"
    assert parse_explore('{"answer": "Paris"}').answer == "Paris"  # an answer and no lookups


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("You're right, I'll keep that in mind for future responses.", "no JSON object"),
        ('{"thought": "x", "sufficient": false', "not valid JSON"),
        ('{"thought": "x", "sufficient": false, "look_up": []}', "non-empty 'look_up'"),
        ('{"thought": "x", "sufficient": true}', "needs an 'answer'"),
        (
            '{"thought": "x", "look_up": [{"entity": "You\'re right", '
            '"relation": "I\'ll keep that in mind for future responses."}]}',
            "reads as prose",
        ),
        ('{"thought": "x", "look_up": [{"entity": "A"}]}', "both 'entity' and 'relation'"),
    ],
)
def test_explore_errors_say_what_is_wrong(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse_explore(text)


def test_complete_and_final():
    text = (
        '{"triplets": [{"subject": "Ed Wood", "relation": "occupation", "object": "film director"}, '
        '["Ed Wood", "born in", "Poughkeepsie"], "(Ed Wood ; nationality ; American)", '
        '{"subject": "Ed Wood", "relation": "occupation", "object": "film director"}, {"subject": "x"}]}'
    )
    assert parse_complete(text) == [
        ("Ed Wood", "occupation", "film director"),
        ("Ed Wood", "born in", "Poughkeepsie"),
        ("Ed Wood", "nationality", "American"),
    ]
    assert parse_complete('{"triplets": []}') == []
    with pytest.raises(ParseError, match="no 'triplets'"):
        parse_complete('{"facts_found": 0}')
    with pytest.raises(ParseError, match="subject"):
        parse_complete('{"triplets": [{"subject": "x"}]}')
    out = parse_final('{"thought": "330 m vs 184 m", "answer": "yes"}')
    assert (out.thought, out.answer) == ("330 m vs 184 m", "yes")
    with pytest.raises(ParseError, match="no 'answer'"):
        parse_final('{"thought": "not sure"}')
