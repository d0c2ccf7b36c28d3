"""The tolerant parser of the agent's three output formats, on well-formed and malformed outputs."""

import json

import pytest

from factory.agent.fields import ParseError
from factory.agent.format import (
    parse_complete,
    parse_explore,
    parse_final,
    render_complete,
    render_explore,
    render_final,
)
from factory.agent.prompts import output_format

# ---------------------------------------------------------------- explore


@pytest.mark.parametrize(
    "text",
    [
        "Thought: need both\nSufficient: no\nLook up:\n- Scott Derrickson | nationality\n- Ed Wood | "
        "nationality",
        "thought: need both\nsufficient: NO\nlook up:\n* Scott Derrickson: nationality\n* Ed Wood: "
        "nationality",
        "**Thought:** need both\n**Sufficient:** no\n**Look up:**\n1. Scott Derrickson | nationality\n2) "
        "Ed Wood | nationality",
        "Thought: need both\r\nSufficient: no\r\nLook up:\r\n• (Scott Derrickson ; nationality)\r\n• Ed "
        "Wood -> nationality",
        "Thought: need both\nSufficient: no\nLook up: Scott Derrickson | nationality\n- Ed Wood | "
        "nationality\n- Ed Wood | nationality",
    ],
    ids=[
        "canonical",
        "lower-case-colon",
        "markdown-numbered",
        "crlf-bullets-parens-arrow",
        "inline-first-and-duplicate",
    ],
)
def test_explore_pairs_in_many_surface_forms(text):
    out = parse_explore(text)
    assert not out.sufficient and out.thought == "need both"
    assert out.pairs == [("Scott Derrickson", "nationality"), ("Ed Wood", "nationality")]


def test_explore_caps_pairs_and_skips_none_lines():
    out = parse_explore(
        "Thought: t\nSufficient: no\nLook up:\n- A | r1\n- None\n- B | r2\n- C | r3", max_pairs=2
    )
    assert out.pairs == [("A", "r1"), ("B", "r2")]


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("Thought: both American.\nSufficient: yes\nAnswer: yes", "yes"),
        ("Thought: x\nAnswer: Paris", "Paris"),  # no Sufficient line, but an answer and no pairs
        ("Thought: x\nEnough: Yes.\nFinal answer: Paris", "Paris"),
        ("The answer is: they both hunt whales.", "they both hunt whales"),  # prose answer of a small model
    ],
)
def test_explore_sufficient_forms(text, answer):
    out = parse_explore(text)
    assert out.sufficient and out.answer == answer and out.pairs == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   \n  ", "empty"),
        ("Thought: x\nSufficient: yes", "needs an 'Answer:'"),
        ("Thought: x\nSufficient: no\nLook up:", "no 'entity | relation' pairs"),
        ("Thought: x\nSufficient: no\nLook up:\n- just an entity", "cannot read an 'entity | relation' pair"),
        ("Example:", "cannot read"),
    ],
    ids=["empty", "blank", "sufficient-without-answer", "no-pairs", "pair-without-relation", "junk"],
)
def test_explore_errors_say_what_is_wrong(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse_explore(text)


# ---------------------------------------------------------------- complete


def test_complete_keeps_every_valid_triplet_deduplicated_in_order():
    text = "\n".join(
        [
            "(Scott Derrickson ; nationality ; American)",
            "- Scott Derrickson | born in | Denver",
            "Triplets: (Ed Wood; nationality; American)",
            "(Scott Derrickson ; nationality ; American)",  # duplicate
            "some chatter that is not a triplet",
            "3. Ed Wood, occupation, film director",
            "(A ; located in ; Paris ; France)",  # four fields: not one triplet
        ]
    )
    out = parse_complete(text)
    assert out == [
        ("Scott Derrickson", "nationality", "American"),
        ("Scott Derrickson", "born in", "Denver"),
        ("Ed Wood", "nationality", "American"),
        ("Ed Wood", "occupation", "film director"),
    ]
    assert len(out.rejected) == 2 and "some chatter" in out.rejected[0]
    assert "holds more than one triplet (4 fields)" in out.rejected[1]


@pytest.mark.parametrize(
    "text", ["None", "none.", "Nothing found", "No relevant triplets found.", "N/A", "- None"]
)
def test_complete_none_forms_mean_nothing_found(text):
    assert parse_complete(text) == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [("", "empty"), ("The Darker You Go (film)", "cannot read a"), ("(only ; two)", "cannot read a")],
)
def test_complete_without_triplet_or_none_is_an_error(text, reason):
    with pytest.raises(ParseError, match=reason):
        parse_complete(text)


# ---------------------------------------------------------------- final


@pytest.mark.parametrize(
    ("text", "thought", "answer"),
    [
        ("Thought: both American\nAnswer: yes", "both American", "yes"),
        ("ANSWER:   Denver  ", "", "Denver"),
        ("The answer is: Lorenzo Monaco.", "", "Lorenzo Monaco"),
        ("The answer is:\n\nMichelangelo.", "", "Michelangelo"),
    ],
)
def test_final_answer_forms(text, thought, answer):
    out = parse_final(text)
    assert (out.thought, out.answer) == (thought, answer)


@pytest.mark.parametrize("text", ["", "Question:", "Thought: I am not sure"])
def test_final_without_answer_is_an_error(text):
    with pytest.raises(ParseError):
        parse_final(text)


# ---------------------------------------------------------------- render -> parse round trip


def test_rendered_outputs_parse_back():
    pairs = [("Scott Derrickson", "nationality"), ("Ed Wood", "nationality")]
    assert parse_explore(render_explore("t", pairs)).pairs == pairs
    out = parse_explore(render_explore("t", [], sufficient=True, answer="yes"))
    assert out.sufficient and out.answer == "yes"
    triplets = [("A", "r", "B"), ("B", "s", "C")]
    assert parse_complete(render_complete(triplets)) == triplets and parse_complete(render_complete([])) == []
    assert parse_final(render_final("t", "Paris")).answer == "Paris"


# ---------------------------------------------------------------- chatter is not data

# Replies a small model actually gave (SmolLM2 behind llama.cpp, and the demo's base model): prose,
# apologies and agreement, none of which names a lookup or states a fact.
CHATTER = [
    "You're right, I'll keep that in mind for future responses.",  # after an empty completion + repair
    "I'm sorry, but I don't have access to the internet, so I cannot look that up.",
    "Sure, here is what I need: the director of the film, and his nationality.",
    "Let me look up the director first, then the nationality.",
    "The film that won the Palme d'Or in 1994 is:\n\n- The film that won the Palme d'Or in 1994 is:",
    "Example 2:\nQuestion: Which river flows through the capital of Hungary?",
]


@pytest.mark.parametrize("text", CHATTER)
def test_chatter_is_a_parse_error_never_a_lookup_or_a_fact(text):
    with pytest.raises(ParseError):
        parse_explore(text)
    with pytest.raises(ParseError):
        parse_complete(text)


@pytest.mark.parametrize(
    "text",
    [
        "Thought: ok\nSufficient: no\nLook up:\n"
        "- You're right | I'll keep that in mind for future responses.",
        "Thought: ok\nSufficient: no\nLook up:\n- Scott Derrickson, nationality",  # a comma is prose
        "Thought: ok\nSufficient: no\nScott Derrickson | nationality",  # neither under Look up nor a bullet
        "- Thank you | let me know if you need anything else",
    ],
)
def test_pairs_need_the_entity_bar_relation_form_and_a_relation_that_is_not_conversation(text):
    with pytest.raises(ParseError):
        parse_explore(text)


def test_format_variants_stay_accepted():
    out = parse_explore("Thought: x\nSufficient: no\nLook up:\nScott Derrickson | nationality")  # no bullet
    assert out.pairs == [("Scott Derrickson", "nationality")]
    out = parse_explore("- I Am Legend (film) | director\n- Sorry (Justin Bieber song) | release year")
    assert out.pairs == [("I Am Legend (film)", "director"), ("Sorry (Justin Bieber song)", "release year")]
    long = "- Raymond Carver | What is the name of the city Raymond Carver was born in"  # a sub-question
    assert parse_explore(long).pairs[0][1].startswith("What is the name")
    # a pronoun inside a title is data (MuSiQue sub-questions), one that opens the relation is talk
    titled = "- How I Met Your Mother | who is the narrator on how i met your mother"
    narrator = "who is the narrator on how i met your mother"
    assert parse_explore(titled).pairs == [("How I Met Your Mother", narrator)]
    album = "- Nothin' My Love Can't Fix | performer of the album Nothin' My Love Can't Fix"
    assert parse_explore(album).pairs[0][1] == "performer of the album Nothin' My Love Can't Fix"
    with pytest.raises(ParseError):
        parse_explore("- Scott Derrickson | you should look up his nationality")
    assert parse_complete("(Ed Wood, occupation, film director)") == [
        ("Ed Wood", "occupation", "film director")
    ]
    with pytest.raises(ParseError):  # a bare comma list is a sentence, not a triplet
        parse_complete("I'm sorry, but the passages do not say, unfortunately")
    with pytest.raises(ParseError):
        parse_complete("(You're right ; I'll keep that in mind for future responses. ; ok)")


# ---------------------------------------------------------------- a triplet is a triplet

# The demo's audit page showed this completion line parsed as one triplet, kept in S_q and grounded:
# unbalanced brackets, an apposition running into a verb, a second "triplet" run into the first.
CHATTER_TRIPLET = (
    "(Henry Grey, 4th Earl of Kent's father, is not a 25 ; 25 December 1505)  The answer, ; 25 December "
    "1505, is not a 25 , 25 December 1505. )"
)


def _as(version: str, triplets: list[tuple[str, str, str]], raw_lines: list[str] = ()) -> str:
    """A completion in ``version``'s syntax: the triplets, plus raw lines (text) / raw strings (JSON)."""
    fmt = output_format(version)
    if fmt.syntax == "text":
        return "\n".join([fmt.render_complete(triplets), *raw_lines]) if triplets else "\n".join(raw_lines)
    items = [{"subject": s, "relation": r, "object": o} for s, r, o in triplets] + list(raw_lines)
    return json.dumps({"triplets": items})


VERSIONS = ("knowtrace-v1", "knowtrace-json-v1")
GOOD = ("George Grey, 2nd Earl of Kent", "died on", "25 December 1505")


@pytest.mark.parametrize("version", VERSIONS)
def test_the_chatter_line_is_an_error_of_its_line_never_a_triplet(version):
    parse = output_format(version).parse_complete
    with pytest.raises(ParseError, match="not one triplet"):
        parse(_as(version, [], [CHATTER_TRIPLET]))
    out = parse(_as(version, [GOOD], [CHATTER_TRIPLET]))
    assert out == [GOOD]  # the good line of the completion is kept
    assert len(out.rejected) == 1 and "Henry Grey" in out.rejected[0]  # the bad one is recorded, with why


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("triplet", "why"),
    [
        (("Kiss and Tell (1945 film", "starred", "Shirley Temple"), "unbalanced brackets|does not close"),
        (("Henry Grey, 4th Earl of Kent's father, is not a 25", "died on", "1505"), "runs on"),
        (("Paris", "capital of", "France. The answer is Paris"), "runs on into a sentence"),
        (("Who was Henry Grey's father? George Grey", "died on", "1505"), "runs on into a sentence"),
        (("A", "related to", "B ; is ; C"), "triplet separator|more than one triplet"),
        (("A", "related to", " ".join(["word"] * 17)), "longer than 16 words"),
        (("A", " ".join(["r"] * 13), "B"), "longer than 12 words"),
        (("Scott Derrickson", "I'll keep that in mind for future responses.", "B"), "conversation"),
    ],
)
def test_each_field_is_a_name_or_a_short_phrase(version, triplet, why):
    fmt = output_format(version)
    text = fmt.render_complete([triplet]) if fmt.syntax == "text" else _as(version, [triplet])
    with pytest.raises(ParseError, match=why):
        fmt.parse_complete(text)


@pytest.mark.parametrize("version", VERSIONS)
def test_real_names_stay_triplets(version):
    names = [
        ("Kiss and Tell (1945 film)", "starred", 'Shirley "Temple" Black'),
        ("St. Louis", "located in", "Missouri"),
        ("Dr. Strangelove", "directed by", "Stanley Kubrick"),
        ("1. FC Köln", "based in", "Cologne"),
        ("U.S. Army", "part of", "United States Armed Forces"),
        ("Panic! at the Disco", "formed in", "Las Vegas"),
        ("John Tuchet, 4th Baron Audley", "father of", "James Tuchet, 5th Baron Audley"),
        ("Who Framed Roger Rabbit?", "released in", "1988"),
    ]
    fmt = output_format(version)
    out = fmt.parse_complete(fmt.render_complete(names))
    assert out == names and out.rejected == []


def test_lines_that_close_badly_or_hold_more_than_one_triplet():
    with pytest.raises(ParseError, match="does not close at the end"):
        parse_complete("(A ; r ; B) and then some talk")
    with pytest.raises(ParseError, match="more than one triplet"):
        parse_complete("A ; r ; B ; s ; C")
    # the one repair: bracketed triplets side by side are those triplets
    assert parse_complete("(A ; r ; B) (C ; s ; D), (E ; t ; F)") == [
        ("A", "r", "B"),
        ("C", "s", "D"),
        ("E", "t", "F"),
    ]
    assert parse_complete("(Sorry (song) ; by ; Justin Bieber).") == [("Sorry (song)", "by", "Justin Bieber")]
