"""One definition per step kind: the renderer's outputs are in the grammar, the grammar refuses chatter,
the printed forms (regex, GBNF, JSON schema) are valid for the engines that read them."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from factory.agent import grammar as g
from factory.agent.fields import KINDS, THOUGHT_CHARS
from factory.agent.format import TEXT
from factory.agent.format_json import JSON
from factory.agent.loop import step_constraints

FORMATS = {"text": TEXT, "json": JSON}
THOUGHT = 'The film "Kiss and Tell" (1945) is by Richard Wallace; Shirley Temple — 3/4 of it in Zürich.'
CONTENT = {
    "explore": [
        ("render_explore", (THOUGHT, [("Scott Derrickson", "nationality"), ("Ed Wood (film)", "director")])),
        ("render_explore", ("Both are American.", [], True, "yes")),
    ],
    "complete": [
        (
            "render_complete",
            ([("Kiss and Tell (1945 film)", "starred", 'Shirley "Temple" Black'), ("A", "r", "B")],),
        ),
        ("render_complete", ([],)),
    ],
    "final": [("render_final", (THOUGHT, "Chief of Protocol"))],
}


def _outputs(fmt, kind):
    return [getattr(fmt, method)(*args) for method, args in CONTENT[kind]]


@pytest.mark.parametrize("syntax", sorted(FORMATS))
@pytest.mark.parametrize("kind", KINDS)
def test_rendered_outputs_are_in_the_grammar_and_parse_back(syntax, kind):
    fmt = FORMATS[syntax]
    regex = fmt.grammar(kind, 2).regex()
    for (method, args), out in zip(CONTENT[kind], _outputs(fmt, kind)):
        assert re.fullmatch(regex, out), out
        parsed = getattr(fmt, method.replace("render", "parse"))(out)
        if kind == "explore":
            thought, pairs, *rest = args
            assert parsed.thought == thought and parsed.pairs == pairs
            assert parsed.sufficient == bool(rest and rest[0]) and parsed.answer == (
                rest[1] if rest else None
            )
        elif kind == "complete":
            assert parsed == args[0]
        else:
            assert (parsed.thought, parsed.answer) == args


CHATTER = [
    "You're right, I'll keep that in mind for future responses.",
    "I'm sorry, but I cannot browse the internet.",
    "Sure! Here is the answer: Paris",
    "",
]


@pytest.mark.parametrize("syntax", sorted(FORMATS))
@pytest.mark.parametrize("kind", KINDS)
def test_the_grammar_refuses_chatter_and_unbounded_fields(syntax, kind):
    fmt = FORMATS[syntax]
    regex = fmt.grammar(kind, 2).regex()
    for text in CHATTER:
        assert not re.fullmatch(regex, text)
    long_thought = "x" * (THOUGHT_CHARS + 1)
    if kind == "explore":
        assert not re.fullmatch(
            regex, fmt.render_explore("t", [("a", "b"), ("c", "d"), ("e", "f")])
        )  # > max_pairs
        assert not re.fullmatch(regex, fmt.render_explore(long_thought, [("a", "b")]))
        assert re.fullmatch(regex, fmt.render_explore("x" * THOUGHT_CHARS, [("a", "b")]))
    if kind == "final":
        assert not re.fullmatch(regex, fmt.render_final(long_thought, "a"))


@pytest.mark.parametrize("syntax", sorted(FORMATS))
def test_printed_forms_are_valid_for_the_engines_that_read_them(syntax):
    from llguidance import LLMatcher, grammar_from

    version = {"text": "knowtrace-v1", "json": "knowtrace-json-v1"}[syntax]
    for kind, c in step_constraints(version, 3).items():
        assert c.name == f"{version}/{kind}/pairs=3"
        assert LLMatcher.validate_grammar(LLMatcher.grammar_from_regex(c.regex)) == ""
        # GBNF read by llguidance's own GBNF front end: an independent check of llama.cpp's syntax
        assert (
            c.gbnf.startswith("root ::= ") and LLMatcher.validate_grammar(grammar_from("gbnf", c.gbnf)) == ""
        )
        if syntax == "text":
            assert c.json_schema is None
            continue
        schema = json.loads(c.json_schema)
        assert LLMatcher.validate_grammar(LLMatcher.grammar_from_json_schema(schema)) == ""
        for out in _outputs(JSON, kind):
            jsonschema.validate(json.loads(out), schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"thought": "x", "note": "You're right"}, schema)


def test_regex_and_gbnf_printers_escape_what_they_must():
    node = g.seq('a"b\\c\n{x}|', g.Chars("^\\n|", 1, 3), g.Rep(g.alt("p", "q"), 0, 2))
    assert re.fullmatch(node.regex(), 'a"b\\c\n{x}|zz') and re.fullmatch(node.regex(), 'a"b\\c\n{x}|zpq')
    assert not re.fullmatch(node.regex(), 'a"b\\c\n{x}||')
    assert g.gbnf(node) == 'root ::= "a\\"b\\\\c\\n{x}|" [^\\n|]{1,3} ("p" | "q"){0,2}\n'


@pytest.mark.parametrize("syntax", sorted(FORMATS))
def test_constrained_triplet_fields_are_names_or_short_phrases(syntax):
    """The grammar's fields match the parser's triplet rules: balanced brackets (one trailing
    qualifier), no separator inside, no question mark; relations without sentence punctuation."""
    fmt = FORMATS[syntax]
    regex = fmt.grammar("complete", 2).regex()

    def fits(*triplets):
        return bool(re.fullmatch(regex, fmt.render_complete(list(triplets))))

    assert fits(("Kiss and Tell (1945 film)", "starred", "Shirley Temple"), ("St. Louis", "in", "Missouri"))
    assert fits(("John Tuchet, 4th Baron Audley", "father of", "James Tuchet"))
    assert not fits(("Henry Grey, 4th Earl of Kent's father, is not a 25", "died", "25 December 1505) The"))
    assert not fits(("Kiss and Tell (1945 film", "starred", "Shirley Temple"))  # unbalanced
    assert not fits(("A (b (c))", "r", "B"))  # nested
    assert not fits(("A", "r", "B ; s ; C"))  # a second triplet inside
    assert not fits(("A", "r", "B | C"))
    assert not fits(("Who is A? B", "r", "C"))
    assert not fits(("A", "born in. The answer", "B"))  # a relation is a short phrase
    if syntax == "json":  # the schema a server constrains with says the same
        import jsonschema

        schema = fmt.json_schema("complete", 2)
        rendered = fmt.render_complete([("Sorry (song)", "by", "Justin Bieber")])
        jsonschema.validate(json.loads(rendered), schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(json.loads(fmt.render_complete([("A", "r", "B ; s ; C")])), schema)
