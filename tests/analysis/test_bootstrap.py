"""Interval helpers on edge shapes that real runs produce."""

from __future__ import annotations

import numpy as np
import pytest

from tokenlens.analysis.bootstrap import interval, rate_interval


@pytest.mark.parametrize("reps", [0, 1, 200])
def test_a_breakdown_with_no_groups_has_no_intervals(reps: int) -> None:
    """A run where no class has rows (an MTP trace with nothing judged) gives empty columns."""
    empty = np.zeros(0)
    lo, hi = rate_interval(empty, np.zeros((reps, 0)), empty, np.zeros(0, int), np.zeros(0, int))
    assert lo.shape == hi.shape == (0,)
    lo, hi = interval(empty, np.zeros((reps, 0)), 0, 0)
    assert lo.shape == hi.shape == (0,)


def test_a_constant_rate_still_gets_a_wilson_interval() -> None:
    """A rate of 1.0 over 40 rows in 8 prompts is not certain: the interval has width."""
    lo, hi = rate_interval(
        np.array([1.0]), np.ones((200, 1)), np.array([40.0]), np.array([8]), np.array([1])
    )
    assert hi[0] == pytest.approx(1.0)
    assert 0.5 < lo[0] < 0.95
