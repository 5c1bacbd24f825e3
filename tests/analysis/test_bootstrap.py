"""Interval helpers on edge shapes that real runs produce."""

from __future__ import annotations

import numpy as np
import pandas as pd
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


def test_results_do_not_depend_on_the_order_of_the_runs() -> None:
    """Cluster codes are sorted keys: the same runs given in another order, their
    requests in another order (as concurrent traces finish them), draw the same
    replicates, so every estimate and interval is the same."""
    from tokenlens.analysis.estimands import key_estimates
    from tokenlens.testing import SCENARIOS, simulate_study
    from tokenlens.testing.estimator import analyze

    study = simulate_study(SCENARIOS["h1_h2"], 12, seed=3)
    frame = study.frame()
    runs = list(dict.fromkeys(frame["run"].astype(str)))
    assert len(runs) == 2
    blocks = []
    for r in reversed(runs):
        rows = frame[frame["run"].astype(str) == r]
        requests = list(dict.fromkeys(rows["request_id"].astype(str)))[::-1]
        blocks += [rows[rows["request_id"].astype(str) == q] for q in requests]
    swapped = pd.concat(blocks)
    swapped = swapped.reset_index(drop=True)
    a = key_estimates(analyze(study, 200, seed=7))
    b = key_estimates(analyze(study, 200, seed=7, frame=swapped))
    for name, est in a.items():
        for key in ("value", "ci_low", "ci_high", "decision_low", "decision_high"):
            x, y = est[key], b[name][key]
            assert (x is None) == (y is None), (name, key)
            if x is not None:
                assert x == pytest.approx(y, abs=1e-12), (name, key)
