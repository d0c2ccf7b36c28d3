"""Fixtures of the backtracing tests."""

from __future__ import annotations

import pytest

from tests.backtrace.cases import cycle_trajectory


@pytest.fixture
def cycle():
    """The cycle of ``cases.cycle_trajectory``."""
    return cycle_trajectory()
