"""Fixtures of the backtracing tests."""

from __future__ import annotations

import pytest

from tests.backtrace.cases import make


@pytest.fixture
def cycle():
    """Film X -director-> Jane Doe -born in-> Paris, plus Film X -shot in-> Paris (a cycle), an
    off-path genre and a triplet beyond the target (Paris -capital of-> France)."""
    return make(
        "Where was the director of Film X born?",
        [
            [
                (
                    "Film X",
                    "director",
                    [
                        ("Film X", "director", "Jane Doe"),
                        ("Film X", "genre", "Drama"),
                        ("Film X", "shot in", "Paris"),
                    ],
                )
            ],
            [
                (
                    "Jane Doe",
                    "birthplace",
                    [("Jane Doe", "born in", "Paris"), ("Paris", "capital of", "France")],
                )
            ],
        ],
        "Film X was directed by Jane Doe, who was born in Paris.",
        "Paris",
    )
