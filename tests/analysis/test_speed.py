"""The speed model against hand-computed values."""

from __future__ import annotations

import pytest

from tokenlens.analysis.speed import (
    BenchPoint,
    fit_draft_cost,
    iid_tokens_per_step,
    position_curve,
    speed_model,
)
from tokenlens.errors import TokenlensError


def test_iid_formula() -> None:
    # a = 0.5, k = 3: 1 + 0.5 + 0.25 + 0.125
    assert iid_tokens_per_step(0.5, 3) == pytest.approx(1.875)
    assert iid_tokens_per_step(1.0, 4) == 5.0


def test_curve_extrapolates_with_the_last_conditional_rate() -> None:
    curve, measured = position_curve([0.8, 0.4], 4)
    assert measured == 2
    assert curve == pytest.approx([0.8, 0.4, 0.2, 0.1])  # rho = 0.4 / 0.8


def test_model_uses_measured_positions_and_cost() -> None:
    m = speed_model([0.8, 0.4, 0.2], iid_rate=0.6, traced_k=3, cost=0.1)
    rows = {r["k"]: r for r in m["per_k"]}
    assert rows[1]["tokens_per_step"] == pytest.approx(1.8)
    assert rows[3]["tokens_per_step"] == pytest.approx(2.4)
    assert rows[3]["speedup"] == pytest.approx(2.4 / 1.3)
    assert rows[3]["tokens_per_step_iid"] == pytest.approx(1 + 0.6 + 0.36 + 0.216)
    # speedups: k1 1.8/1.1=1.636, k2 2.2/1.2=1.833, k3 1.846, k4 2.5/1.4=1.786
    assert m["recommended_k"] == 3
    assert not rows[3]["extrapolated"] and rows[4]["extrapolated"]


def test_fit_draft_cost_recovers_c() -> None:
    # baseline 10 tok/s; with c = 0.25 a k-step takes (1 + 0.25 k) / 10 s.
    points = [
        BenchPoint(k, tps, tps / ((1 + 0.25 * k) / 10), 10.0)
        for k, tps in ((1, 1.7), (3, 2.4), (5, 2.8))
    ]
    assert fit_draft_cost(points) == pytest.approx(0.25)
    with pytest.raises(TokenlensError):
        fit_draft_cost([BenchPoint(0, 1.0, 10.0, 10.0)])


def test_an_assumed_cost_recommends_no_k() -> None:
    # n-gram's default cost 0 would make the largest k "best": an assumption is no advice.
    m = speed_model([0.5, 0.3, 0.2], iid_rate=0.5, traced_k=3, cost=0.0, cost_measured=False)
    assert m["recommended_k"] is None and m["recommended_speedup"] is None
    assert "--bench" in m["no_recommendation"]
    assert m["per_k"][2]["speedup"] == pytest.approx(2.0)  # the curve is still given
