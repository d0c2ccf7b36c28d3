"""The training loop's step budget layout (factory.train.trainer)."""

from __future__ import annotations

import pytest

from factory.train.trainer import step_budget_rows


def test_step_budget_rows_are_full_seeded_passes_cut_to_the_budget():
    rows = list("abcde")
    laid = step_budget_rows(rows, 12, seed=3)
    assert len(laid) == 12 and sorted(laid[:5]) == rows and sorted(laid[5:10]) == rows
    counts = {r: laid.count(r) for r in rows}
    assert sorted(counts.values()) == [2, 2, 2, 3, 3]
    assert step_budget_rows(rows, 12, seed=3) == laid and step_budget_rows(rows, 12, seed=4) != laid
    assert sorted(step_budget_rows(rows, 3, seed=3)) != rows and len(step_budget_rows(rows, 3, seed=3)) == 3
    with pytest.raises(ValueError, match="no rows"):
        step_budget_rows([], 4, seed=0)
