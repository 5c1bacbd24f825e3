"""Do the 95% intervals cover the planted values 95% of the time?

Design. One scenario with strong within-request correlation (request effect
m ~ U(0.5, 1.5)), 30 requests per language, 20 steps of k = 3 drafts each. The truth of
every estimand is its value in a separate population of 20,000 requests per language
simulated from the same planted parameters, computed here with plain pandas (not with
the code under test); its Monte Carlo error is ~4% of one study's standard error, so
it does not move coverage measurably.

Band. Over N = 200 independent studies the number of intervals that cover is
Binomial(200, 0.95) when the intervals are right. We accept the central 99.9% of that
distribution (scipy's exact binomial quantiles: 179..198 of 200, i.e. 0.895..0.990)
for each of the 8 estimands: a correct method fails one of them with probability
< 8 x 0.1% = 0.8%. 400 bootstrap replicates per study: the Monte Carlo error of a
2.5% quantile from 400 draws widens or narrows an interval by a few percent of its
width, well inside the band.

The test can fail: the same studies with naive token-level (Wald) intervals, which
ignore that tokens of one request are correlated, must fall below the band.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tokenlens.analysis.bootstrap import Resampler
from tokenlens.analysis.breakdown import per_lang, rates, row_mask
from tokenlens.analysis.gap import gap
from tokenlens.analysis.simulate import scenario, simulate

STUDIES = 200
N_BOOT = 400
SCENARIO = scenario(True, True, requests=30, steps=20, k=3, spread=0.5)
CLASSES = (("ja", "kanji"), ("ja", "hiragana"), ("ja", "punct"), ("en", "latin"), ("en", "punct"))
LOW, HIGH = (stats.binom.ppf(q, STUDIES, 0.95) / STUDIES for q in (0.0005, 0.9995))


def _points(f: pd.DataFrame) -> dict[str, float]:
    """Estimands by direct counting (independent of the analysis code)."""
    out: dict[str, float] = {}
    for lang in ("ja", "en"):
        out[f"acceptance/{lang}"] = float(f.loc[f["lang"] == lang, "accepted"].mean())
    judged = f[f["judged"]]
    for lang, cls in CLASSES:
        sel = (judged["lang"] == lang) & (judged["script"] == cls)
        out[f"class/{lang}/{cls}"] = float(judged.loc[sel, "accepted"].mean())
    out["gap"] = out["acceptance/ja"] - out["acceptance/en"]
    return out


def _intervals(f: pd.DataFrame, seed: int) -> dict[str, tuple[float, float, float]]:
    """(lo, hi, naive half-width) per estimand, from the analysis code."""
    rs = Resampler.from_frame(f, N_BOOT, seed)
    all_rows, judged = row_mask(f, "all"), row_mask(f, "judged")
    acc = per_lang(f, rs, all_rows, 1)
    by = rates(f, rs, "script", judged, 1)
    out = {}
    for lang in ("ja", "en"):
        e = acc[lang]
        out[f"acceptance/{lang}"] = (e["ci_low"], e["ci_high"], _wald(e["rate"], e["n"]))
    for lang, cls in CLASSES:
        e = by[lang][cls]
        out[f"class/{lang}/{cls}"] = (e["ci_low"], e["ci_high"], _wald(e["rate"], e["n"]))
    g = gap(f, rs, all_rows)
    wald_ja, wald_en = (_wald(acc[x]["rate"], acc[x]["n"]) for x in ("ja", "en"))
    naive = float(np.hypot(wald_ja, wald_en))
    out["gap"] = (g["ci_low"], g["ci_high"], naive)
    return out


def _wald(p: float, n: int) -> float:
    return 1.96 * float(np.sqrt(p * (1 - p) / n))


@pytest.fixture(scope="module")
def coverage() -> tuple[dict[str, float], dict[str, float]]:
    population = scenario(True, True, requests=20_000, steps=20, k=3, spread=0.5)
    truth = _points(simulate(population, "draft_model", seed=10**6).frame("truth"))
    hits: dict[str, int] = dict.fromkeys(truth, 0)
    naive: dict[str, int] = dict.fromkeys(truth, 0)
    for i in range(STUDIES):
        f = simulate(SCENARIO, "draft_model", seed=i).frame("r")
        points = _points(f)
        for name, (lo, hi, half) in _intervals(f, seed=i).items():
            hits[name] += lo <= truth[name] <= hi
            naive[name] += abs(points[name] - truth[name]) <= half
    return {k: v / STUDIES for k, v in hits.items()}, {k: v / STUDIES for k, v in naive.items()}


def test_band_is_the_binomial_one() -> None:
    assert (LOW, HIGH) == (0.895, 0.99)


def test_clustered_intervals_cover_at_95(
    coverage: tuple[dict[str, float], dict[str, float]],
) -> None:
    clustered = coverage[0]
    bad = {k: v for k, v in clustered.items() if not LOW <= v <= HIGH}
    assert not bad, f"coverage outside [{LOW}, {HIGH}]: {bad}"


def test_naive_intervals_would_fail(coverage: tuple[dict[str, float], dict[str, float]]) -> None:
    """Token-level intervals undercover: the band is tight enough to catch a wrong method."""
    naive = coverage[1]
    assert naive["acceptance/ja"] < LOW and naive["acceptance/en"] < LOW and naive["gap"] < LOW
