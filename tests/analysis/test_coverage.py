"""Do the 95% intervals cover the population values 95% of the time, for every part?

Design. ``h1_h2`` studies from the independent test bed (tokenlens.testing): a
draft-model and an n-gram run on the same 30 Japanese/English prompt pairs (the
rules' minimum), k = 3, up to 96 output tokens, prompt effects shared across runs,
request effects, serially correlated confidence and agreement, calibrated to real
traces. Every estimand of ``key_estimates`` is checked: acceptance (ja, en), the
judged gap, composition, within and out-of-support per family, and the H2
difference in differences. The truth of each is its population value: the same
estimand on 20,000 simulated pairs, computed by tokenlens.testing.truth (its own
implementation of the definitions, not the code under test); its Monte Carlo error is
~4% of one study's standard error, so it does not move coverage measurably.

Band. Over S = 200 independent studies the number of covering intervals is
Binomial(200, 0.95) when the intervals are right. We accept the central 99.9% of
that distribution (exact binomial quantiles: 179..198 of 200, i.e. 0.895..0.990) for
each estimand; with 11 estimands a correct method fails the test with probability
below 1.1%. An estimand not estimable in a study counts as a miss. With confidence
bins every bin has rows of both languages in the population, so the out-of-support
part is exactly 0 there; at this design every bin is in support in every study too,
and the estimator must say "exactly zero" (a value without an interval): such a
part passes only when every study reports it so and it equals the population value.

The test can fail: token-level (Wald) intervals on the same studies, which ignore
that tokens of one prompt are correlated, fall below the band, and so do the
intervals when the truth is moved by 1.5 standard errors (a bias of that size).
"""

from __future__ import annotations

from fractions import Fraction
from math import comb
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tokenlens.testing import SCENARIOS, simulate_study
from tokenlens.testing.estimator import analyze, key_estimates
from tokenlens.testing.truth import ESTIMANDS, estimands, population, rows_of

SCENARIO = SCENARIOS["h1_h2"]
N = 30
STUDIES = 200
N_BOOT = 400
LOW, HIGH = (stats.binom.ppf(q, STUDIES, 0.95) / STUDIES for q in (0.0005, 0.9995))
NAIVE = ("acceptance_ja", "acceptance_en", "gap_trained")
BIASED = ("composition_trained", "within_trained", "h2_did")


def _naive(frame: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """(point, token-level Wald half-width) of acceptance per language and the judged gap."""
    trained = frame[frame["method"] != "ngram"]
    out = {}
    parts = {}
    for lang in ("ja", "en"):
        acc = trained.loc[trained["lang"] == lang, "accepted"].to_numpy(dtype=float)
        out[f"acceptance_{lang}"] = (acc.mean(), 1.96 * acc.std() / np.sqrt(len(acc)))
        judged = trained.loc[(trained["lang"] == lang) & trained["judged"], "accepted"]
        j = judged.to_numpy(dtype=float)
        parts[lang] = (j.mean(), j.var() / len(j))
    gap = parts["ja"][0] - parts["en"][0]
    out["gap_trained"] = (gap, 1.96 * float(np.sqrt(parts["ja"][1] + parts["en"][1])))
    return out


@pytest.fixture(scope="module")
def coverage() -> dict[str, dict[str, float]]:
    truth = population(SCENARIO, pairs=20_000, seed=10**6)
    assert all(truth[name] is not None for name in ESTIMANDS), truth
    hits: dict[str, int] = dict.fromkeys(ESTIMANDS, 0)
    exact: dict[str, int] = dict.fromkeys(ESTIMANDS, 0)
    naive: dict[str, int] = dict.fromkeys(NAIVE, 0)
    biased: dict[str, int] = dict.fromkeys(BIASED, 0)
    for i in range(STUDIES):
        study = simulate_study(SCENARIO, N, seed=i)
        est: dict[str, dict[str, Any]] = key_estimates(analyze(study, N_BOOT, seed=i))
        for name in ESTIMANDS:
            e, t = est[name], truth[name]
            if t is None or e["value"] is None:
                continue
            if e["ci_low"] is not None and e["ci_high"] is not None:
                hits[name] += e["ci_low"] <= t <= e["ci_high"]
            elif abs(e["value"] - t) < 1e-12:  # a structural value, exact: no interval
                exact[name] += 1
        for name, (point, half) in _naive(study.frame()).items():
            naive[name] += abs(point - float(truth[name] or 0.0)) <= half
        for name in BIASED:
            e = est[name]
            if e["ci_low"] is None or e["ci_high"] is None:
                continue
            se = (e["ci_high"] - e["ci_low"]) / (2 * 1.96)
            moved = float(truth[name] or 0.0) + 1.5 * se
            biased[name] += e["ci_low"] <= moved <= e["ci_high"]
    return {
        "clustered": {k: v / STUDIES for k, v in hits.items()},
        "exact": {k: v / STUDIES for k, v in exact.items()},
        "naive": {k: v / STUDIES for k, v in naive.items()},
        "biased": {k: v / STUDIES for k, v in biased.items()},
    }


def test_band_is_the_binomial_one() -> None:
    """[LOW, HIGH] is the central 99.9% of Binomial(STUDIES, 0.95), checked against the
    probability mass function summed here in exact fractions (not scipy's quantiles):
    at most 0.05% lies beyond each end, moving either end inward would leave more than
    that beyond it, and over all estimands a correct method fails below 1.1% of the time
    (union bound, whatever the estimands' correlation)."""
    p, tail = Fraction(95, 100), Fraction(5, 10_000)
    pmf = [comb(STUDIES, k) * p**k * (1 - p) ** (STUDIES - k) for k in range(STUDIES + 1)]
    assert sum(pmf) == 1
    lo, hi = round(LOW * STUDIES), round(HIGH * STUDIES)
    assert (lo / STUDIES, hi / STUDIES) == (LOW, HIGH)  # whole counts of covering studies
    below, above = sum(pmf[:lo]), sum(pmf[hi + 1 :])
    assert below <= tail and above <= tail
    assert below + pmf[lo] >= tail and above + pmf[hi] >= tail  # the tightest such band
    assert len(ESTIMANDS) * (below + above) < Fraction(11, 1000)


def test_every_part_covers_at_95(coverage: dict[str, dict[str, float]]) -> None:
    got = coverage["clustered"]
    bad = {k: v for k, v in got.items() if not LOW <= v <= HIGH and coverage["exact"][k] < 1}
    assert not bad, f"coverage outside [{LOW}, {HIGH}]: {bad} (all: {got})"


def test_token_level_intervals_would_fail(coverage: dict[str, dict[str, float]]) -> None:
    """Wald intervals over tokens undercover: the band is tight enough to catch them."""
    assert all(v < LOW for v in coverage["naive"].values()), coverage["naive"]


def test_a_bias_of_one_and_a_half_standard_errors_would_fail(
    coverage: dict[str, dict[str, float]],
) -> None:
    assert all(v < LOW for v in coverage["biased"].values()), coverage["biased"]


@pytest.mark.parametrize("name", ["h1_h2", "ngram_ja_advantage"])
def test_point_estimates_follow_the_definitions(name: str) -> None:
    """The estimator's point values = the test bed's own implementation of the spec."""
    study = simulate_study(SCENARIOS[name], 60, seed=3)
    est = key_estimates(analyze(study, 50, seed=0))
    mine = estimands(rows_of(study))
    for key in ESTIMANDS:
        if mine[key] is None:
            assert est[key]["value"] is None and est[key]["not_estimable"], key
        else:
            assert est[key]["value"] == pytest.approx(mine[key], abs=1e-9), key
