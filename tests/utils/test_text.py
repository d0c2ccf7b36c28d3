"""Answer normalisation is the official HotpotQA one on any text (its fast ASCII path included); question
keys fold Unicode look-alikes; passages read as text whichever corpus's sentence style they come in."""

from __future__ import annotations

import random

import pytest

from factory.utils.text import content_tokens, join_sentences, normalize_answer, normalize_question
from tests.utils.test_metrics import _official_normalize

# articles, words that hold them, punctuation, whitespace, a control character, non-ASCII letters
PIECES = ["a", "an", "the", "The", "A", "then", "anthem", "x", "'", ".", "-", ",", "_", " ", "\t", "\n",
          "\x01", "é", "ß", "—", "«", "Ⅻ", "ｔ", "1", "9"]  # fmt: skip


def test_random_texts_normalise_as_the_official_code_does():
    rng = random.Random(0)
    texts = ["".join(rng.choices(PIECES, k=rng.randint(0, 12))) for _ in range(3000)]
    texts += [" ".join(rng.choices(PIECES[:8], k=5)) for _ in range(500)]  # plain ASCII: the fast path
    assert [normalize_answer(t) for t in texts] == [_official_normalize(t) for t in texts]
    assert normalize_answer(None) == ""


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Who wrote THE Hobbit?", "who wrote the hobbit"),
        ("Which ｆｉｌｍ came first?", "Which film came first"),  # full-width letters
        ("What is the ﬁnal score?", "what is the final score"),  # a ligature
        ("Where is Café Central?", "Where is Cafe\u0301 Central?"),  # composed vs combining accent
    ],
)
def test_one_question_written_two_ways_has_one_key(a, b):
    assert normalize_question(a) == normalize_question(b)


def test_different_questions_keep_different_keys():
    assert normalize_question("Who wrote the Hobbit?") != normalize_question("Who wrote Hobbit 2?")


def test_content_tokens_drop_stop_words_case_and_accents():
    assert content_tokens("The Café of Émile Zola's in Paris") == ["cafe", "emile", "zola", "paris"]
    assert content_tokens(None) == []


@pytest.mark.parametrize(
    ("sentences", "text"),
    [
        ([" Paris is a city.", " It is in France."], "Paris is a city. It is in France."),  # HotpotQA
        (["Paris is a city.", "It is in France."], "Paris is a city. It is in France."),  # 2Wiki
        (["First.", "", "Second."], "First. Second."),
        ([], ""),
    ],
)
def test_sentences_join_into_readable_text_from_either_corpus(sentences, text):
    assert join_sentences(sentences) == text
