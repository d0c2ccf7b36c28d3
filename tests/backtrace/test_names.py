"""Which names may link by a token subset: strong tokens and title-case surfaces."""

from __future__ import annotations

from factory.backtrace.names import is_strong_token, is_title_case_surface


def test_strong_tokens_exclude_numbers_short_tokens_stop_and_common_words():
    assert is_strong_token("cincinnati") and is_strong_token("dupage") and is_strong_token("1st") is False
    for weak in ("8", "1975", "b", "us", "st", "the", "of", "film", "city", "country", "song", "people"):
        assert not is_strong_token(weak), weak
    assert is_strong_token("american") and is_strong_token("dutch")  # nationalities name something


def test_title_case_surfaces_are_proper_names_of_several_words():
    assert is_title_case_surface("Lake District") and is_title_case_surface("Bank of England")
    assert is_title_case_surface("United States")
    assert not is_title_case_surface("Film")  # a single capitalised word: subjects start with capitals
    assert not is_title_case_surface("Coffee plants") and not is_title_case_surface("lake district")
    assert not is_title_case_surface("")
