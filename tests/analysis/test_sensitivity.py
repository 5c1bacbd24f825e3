"""A verdict's sensitivity: where it flips in δ, on the all-token gap, per k and under
the first rules' 95% reading; the frozen rule set in the signature; H2's power from the
whole conjunction."""

from __future__ import annotations

import math
from typing import Any

import pytest
from scipy import stats

from tokenlens.analysis.decompose import Support
from tokenlens.analysis.power import bivariate_normal_cdf, power_conjunction
from tokenlens.analysis.rules import (
    INCONCLUSIVE,
    NO_DEFICIT,
    NOT_SUPPORTED,
    REPORTED_KEYS,
    SUPPORTED,
    Rules,
    verdict_of,
)
from tokenlens.analysis.sensitivity import flips
from tokenlens.analysis.verdicts import rules_identity


def fig(lo: float, hi: float, dlo: float, dhi: float) -> dict[str, Any]:
    return {
        "value": (lo + hi) / 2,
        "ci_low": lo,
        "ci_high": hi,
        "decision_low": dlo,
        "decision_high": dhi,
    }


# The committed study's trained family, as the issue reads it: gap decision interval
# -1.80 to +1.96 pp, composition +1.1 (decision -0.2 to +2.5), check +4.7.
GATE = fig(-0.022, 0.023, -0.0180, 0.0196)
H1_EFFECT = fig(-0.005, 0.028, -0.002, 0.025)
H1_CHECK = fig(0.029, 0.066, 0.032, 0.063)


def test_no_deficit_flips_below_the_gates_lower_bound() -> None:
    f = {"gate": GATE, "effect": H1_EFFECT, "check": H1_CHECK, "both": False}
    out = flips(f, 0.02)
    assert out["verdict"] == NO_DEFICIT
    assert out["below"]["delta"] == pytest.approx(0.0180)
    assert out["below"]["verdict"] == NOT_SUPPORTED  # composition and check still read no
    assert out["above"] is None  # a larger margin only widens "no deficit"


def test_flips_on_both_sides() -> None:
    gate = fig(-0.08, -0.02, -0.07, -0.03)  # a deficit of 3 to 7 pp
    effect = fig(-0.07, -0.03, -0.065, -0.035)
    f = {"gate": gate, "effect": effect, "check": None, "both": False}
    out = flips(f, 0.02)
    assert out["verdict"] == SUPPORTED
    # the effect's decision interval ends at -3.5 pp: for a margin above 3.5 pp it
    # reaches across -delta (inconclusive); the gate would only read "no deficit"
    # above 7 pp, after that
    assert out["above"] == {"delta": pytest.approx(0.035), "verdict": INCONCLUSIVE}
    assert out["below"] is None  # every smaller margin still reads the effect as yes


def test_verdict_on_the_reported_interval_is_the_first_rule() -> None:
    # decision interval above -delta, 95% interval reaching below: the rules disagree
    assert verdict_of(GATE, H1_EFFECT, H1_CHECK, 0.02, False) == NO_DEFICIT
    assert verdict_of(GATE, H1_EFFECT, H1_CHECK, 0.02, False, REPORTED_KEYS) == NOT_SUPPORTED
    h2_effect = fig(-0.234, -0.165, -0.228, -0.171)
    h2_check = fig(-0.023, 0.003, -0.021, 0.001)
    assert verdict_of(GATE, h2_effect, h2_check, 0.02, True, REPORTED_KEYS) == INCONCLUSIVE


def test_rule_set_hash_moves_with_every_rule() -> None:
    base = rules_identity(Rules(), Support())
    assert rules_identity(Rules(), Support()) == base and len(base) == 12
    assert rules_identity(Rules(delta=0.03), Support()) != base
    assert rules_identity(Rules(alpha=0.025), Support()) != base
    assert rules_identity(Rules(), Support(min_rows=20)) != base


def test_bivariate_normal_by_owens_t() -> None:
    for h, k, rho in ((0.3, -0.5, 0.6), (-1.0, -2.0, 0.9), (0.0, 0.4, 0.2), (1.2, 0.0, -0.4)):
        want = stats.multivariate_normal.cdf([h, k], cov=[[1.0, rho], [rho, 1.0]])
        assert bivariate_normal_cdf(h, k, rho) == pytest.approx(want, abs=1e-6)
    assert bivariate_normal_cdf(0.5, -0.3, 0.0) == pytest.approx(
        stats.norm.cdf(0.5) * stats.norm.cdf(-0.3)
    )


def test_h2_power_is_the_conjunctions() -> None:
    df = 59
    t975 = stats.t.ppf(0.975, df)
    se_d, se_w = 0.02, 0.01

    def figure(value: float, se: float) -> dict[str, float]:
        return {"value": value, "ci_low": value - t975 * se, "ci_high": value + t975 * se}

    rules = Rules(power_effects=(0.05, 0.1))
    out = power_conjunction(figure(-0.1, se_d), figure(-0.01, se_w), 0.0, df, rules, 60)
    q = stats.t.ppf(0.95, df)
    for size in (0.05, 0.1):
        a = (-0.02 + size) / se_d - q
        b = (-0.02 + size) / se_w - q
        assert out["power_at"][f"{size:g}"] == pytest.approx(
            stats.norm.cdf(a) * stats.norm.cdf(b), abs=1e-6
        )
    # the conjunction needs at least what the effect alone needs (up to the effect-alone
    # formula's t quantile for the 80%, where the conjunction uses the normal's)
    assert out["mde"] >= out["mde_effect_alone"] - 1e-3
    # at the mde the whole rule finds the effect 80% of the time
    a = (-0.02 + out["mde"]) / se_d - q
    b = (-0.02 + out["mde"]) / se_w - q
    assert stats.norm.cdf(a) * stats.norm.cdf(b) == pytest.approx(0.8, abs=1e-3)
    assert out["rule"].startswith("conjunction")
    assert math.isfinite(out["prompts_needed"]["0.05"])


def test_h2_power_without_intervals_is_not_estimable() -> None:
    out = power_conjunction(None, None, None, 59, Rules(), 60)
    assert out["mde"] is None and out["not_estimable"] == "no interval"
