import pytest

from factory.utils.metrics import exact_match, f1
from factory.utils.text import normalize_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  a  cat, an owl & the dog ", "cat owl dog"),
        ("U.S.A.", "usa"),
        ("Theatre", "theatre"),  # 'the' only as a whole word
    ],
)
def test_normalisation_is_the_official_one(text, expected):
    assert normalize_answer(text) == expected


def _official_normalize(text):
    """The official SQuAD v1.1 / HotpotQA evaluation code's normalisation, verbatim in effect."""
    import re
    import string

    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", text).split())


def test_normalisation_matches_the_official_code_on_the_corpora_and_odd_text(corpora):
    import json

    texts = [
        "A\tthe\nan",
        "—the»",
        "l'the ÉCOLE",
        "x\x01the",
        "the_an",
        "naïve—a café",
        "Ⅻ ｔｈｅ",
        "\u00a0the\u00a0",
        "",
        "the",
    ]
    for record in json.loads((corpora / "hotpotqa" / "dev_sample.json").read_text()):
        texts += [record["question"], record["answer"], *(title for title, _ in record["context"])]
    for record in json.loads((corpora / "2wikimultihopqa" / "dev_sample.json").read_text()):
        texts += [
            record["question"],
            record["answer"],
            *(part for triple in record["evidences"] for part in triple),
        ]
    assert [normalize_answer(t) for t in texts] == [_official_normalize(t) for t in texts]


def test_exact_match_uses_normalisation_and_aliases():
    assert exact_match("the Beatles.", ["Beatles"]) == 1.0
    assert exact_match("Paris", ["Lyon", "paris"]) == 1.0
    assert exact_match("Paris, France", ["Paris"]) == 0.0
    assert exact_match(None, ["x"]) == 0.0


def test_f1_is_token_count_f1_not_set_f1():
    # prediction "new new york": common = min(2,1) new + 1 york = 2 -> P = 2/3, R = 2/2 -> F1 = 0.8
    assert f1("new new york", ["new york"]) == pytest.approx(0.8)
    # a set F1 would give 1.0 here
    assert f1("york york", ["york"]) == pytest.approx(2 * 0.5 * 1 / 1.5)


def test_f1_partial_overlap_hand_computed():
    # pred tokens: barack obama jr ; gold: barack obama -> P = 2/3, R = 1 -> F1 = 0.8
    assert f1("Barack Obama Jr.", "Barack Obama") == pytest.approx(0.8)
    assert f1("John Smith", ["Jane Doe"]) == 0.0


def test_f1_takes_best_alias():
    assert f1("Big Apple", ["New York City", "the Big Apple"]) == 1.0


@pytest.mark.parametrize("special", ["yes", "no", "noanswer"])
def test_yes_no_rule(special):
    assert f1(special, [special]) == 1.0
    other = "no" if special == "yes" else "yes"
    assert f1(other, [special]) == 0.0
    assert f1(f"{special} indeed", [special]) == 0.0  # official rule: 0 unless equal
    assert f1(special, [f"{special} sir"]) == 0.0
