"""The test bed's margin scenarios, assumption breakers and the committed design."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tokenlens.testing.scenarios import (
    ALL_SCENARIOS,
    ASSUMPTION_SCENARIOS,
    MARGIN_SCENARIOS,
    SCENARIOS,
)
from tokenlens.testing.simulate import committed_runs, simulate_study
from tokenlens.testing.step_process import speculate
from tokenlens.testing.truth import population


@pytest.mark.parametrize(
    ("name", "estimand"),
    [
        ("margin", "gap_trained"),
        ("margin_h1", "composition_trained"),
        ("margin_check", "within_trained"),
    ],
)
def test_margin_scenarios_sit_at_minus_delta(name: str, estimand: str) -> None:
    """Solved on 20,000 pairs; 5,000 of them (the same seed) stay within sampling noise."""
    value = population(MARGIN_SCENARIOS[name], pairs=5000)[estimand]
    assert value is not None and value == pytest.approx(-0.02, abs=0.006)


def test_margin_check_puts_the_effect_far_beyond_the_margin() -> None:
    pop = population(MARGIN_SCENARIOS["margin_check"], pairs=5000)
    assert pop["h2_did"] is not None and pop["h2_did"] < -0.15


def test_standard_scenarios_come_first_with_unchanged_seeds() -> None:
    names = list(ALL_SCENARIOS)
    assert names[: len(SCENARIOS)] == list(SCENARIOS)
    assert set(MARGIN_SCENARIOS) | set(ASSUMPTION_SCENARIOS) <= set(names)


def test_replayed_runs_share_one_agreement_sequence() -> None:
    study = simulate_study(SCENARIOS["h2"], 6, seed=2, runs=committed_runs(), replay=True)
    by = {r.spec.label: r for r in study.runs}
    for method in ("draft_model", "ngram"):
        first = by[f"{method}-k1"]
        for k in (2, 3, 4, 5):
            other = by[f"{method}-k{k}"]
            assert np.array_equal(first.agree, other.agree)
            assert np.array_equal(first.offer, other.offer)
    # an output position judged in two runs is accepted in both or in neither
    a, b = by["draft_model-k1"].events, by["draft_model-k5"].events
    seen = {
        (int(r), int(i)): bool(x)
        for r, i, x, j in zip(a.request, a.output_index, a.accepted, a.judged, strict=True)
        if j and i >= 0
    }
    both = [
        (seen[(int(r), int(i))], bool(x))
        for r, i, x, j in zip(b.request, b.output_index, b.accepted, b.judged, strict=True)
        if j and i >= 0 and (int(r), int(i)) in seen
    ]
    assert both and all(x == y for x, y in both)
    independent = simulate_study(SCENARIOS["h2"], 6, seed=2, runs=committed_runs())
    runs = {r.spec.label: r for r in independent.runs}
    assert not np.array_equal(runs["draft_model-k1"].agree, runs["draft_model-k5"].agree)


def test_drift_lowers_deeper_positions_only() -> None:
    agree = np.ones((1, 12), dtype=bool)
    offer = np.ones((1, 12), dtype=bool)
    length = np.array([8])
    keep = np.full((1, 12), 0.7)  # 0.7 < 0.8 ** 1 = 0.8, but not < 0.8 ** 2 = 0.64
    ev = speculate(agree, offer, length, 3, keep, decay=0.8)
    first = [
        (int(p), bool(a))
        for p, a, s in zip(ev.position, ev.accepted, ev.step, strict=True)
        if s == 0
    ]
    assert first == [(0, True), (1, True), (2, False)]
    same = speculate(agree, offer, length, 3, keep, decay=1.0)
    plain = speculate(agree, offer, length, 3)
    assert np.array_equal(same.accepted, plain.accepted)


def test_token_weights_hurt_the_drafter_where_the_features_are() -> None:
    sc = ASSUMPTION_SCENARIOS["token_hurts"]
    hurt = simulate_study(sc, 40, seed=1)
    plain = simulate_study(
        replace(sc, drafters=tuple(replace(d, token_weights=()) for d in sc.drafters)), 40, seed=1
    )
    assert np.array_equal(hurt.q, plain.q)  # the target's confidence is untouched
    for a, b in zip(hurt.runs, plain.runs, strict=True):
        assert (a.agree_prob <= b.agree_prob + 1e-12).all()
        assert (a.agree_prob < b.agree_prob).any()
