"""H2 without its control: the bounded reading (rules.bounded_reading) and its error rate
under the assumption it states."""

from __future__ import annotations

import numpy as np
import pytest

from tokenlens.analysis.h2_bound import bounded_effect, span
from tokenlens.analysis.rules import (
    INCONCLUSIVE,
    NA,
    NO,
    NOT_SUPPORTED,
    SUPPORTED,
    UNSURE,
    YES,
    bounded_reading,
    verdict_of,
)
from tokenlens.analysis.summary_fields import json_value
from tokenlens.analysis.summary_figures import Estimate
from tokenlens.analysis.summary_verdicts import Bounded


def _fig(lo: float, hi: float) -> dict[str, float]:
    return {
        "value": (lo + hi) / 2,
        "ci_low": lo - 0.01,
        "ci_high": hi + 0.01,
        "decision_low": lo,
        "decision_high": hi,
    }


@pytest.mark.parametrize(
    ("lo", "hi", "reading"),
    [
        (-0.18, -0.15, YES),  # -15 + 6 = -9 pp, beyond -2
        (-0.10, -0.07, UNSURE),  # -7 + 6 = -1: not beyond -2; -10 - 6 not above -2
        (-0.12, -0.085, YES),  # -8.5 + 6 = -2.5
        (0.05, 0.08, NO),  # +5 - 6 = -1 > -2
        (0.03, 0.06, UNSURE),  # +3 - 6 = -3: could be a deficit
    ],
)
def test_the_bounded_reading_shifts_the_check_by_the_bound(
    lo: float, hi: float, reading: str
) -> None:
    assert bounded_reading(_fig(lo, hi), 0.06, 0.02) == reading


def test_no_interval_no_reading() -> None:
    assert bounded_reading(None, 0.06, 0.02) == NA
    assert bounded_reading({"decision_low": -0.2, "decision_high": -0.2}, 0.06, 0.02) == NA
    assert bounded_reading({"decision_low": None, "decision_high": -0.1}, 0.06, 0.02) == NA


def test_verdicts_with_a_bound_read_the_check_twice() -> None:
    gate = _fig(-0.20, -0.15)
    big, small, none = _fig(-0.18, -0.15), _fig(-0.08, -0.05), _fig(0.0, 0.03)
    missing = {"value": None, "ci_low": None, "ci_high": None}
    assert verdict_of(gate, missing, big, 0.02, True, bound=0.06) == SUPPORTED
    # the check alone says yes, the bounded effect is unsure: the conjunction waits
    assert verdict_of(gate, missing, small, 0.02, True, bound=0.06) == INCONCLUSIVE
    assert verdict_of(gate, missing, none, 0.02, True, bound=0.06) == NOT_SUPPORTED
    # without a bound (the control holds), a missing effect never supports
    assert verdict_of(gate, missing, big, 0.02, True) == INCONCLUSIVE


def test_supported_stays_under_alpha_when_the_shared_gap_is_within_the_bound() -> None:
    """If the true within-confidence gap c lies in [-bound, 0] and the decision interval
    covers one-sidedly at 95%, at most 5% of studies read yes (here: a normal estimate,
    decision interval +/-1.645 se)."""
    rng = np.random.default_rng(0)
    se, n = 0.012, 20_000
    for c in (-0.06, -0.05, -0.03, 0.0):
        est = rng.normal(c, se, n)
        yes = sum(
            bounded_reading(_fig(e - 1.645 * se, e + 1.645 * se), 0.06, 0.02) == YES for e in est
        )
        assert yes / n <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / n), (c, yes / n)
    # and a planted -16 pp gap (the positive control's 0 % drafter) is found every time
    est = rng.normal(-0.16, se, 2000)
    assert all(
        bounded_reading(_fig(e - 1.645 * se, e + 1.645 * se), 0.06, 0.02) == YES for e in est
    )


def test_the_bounded_effect_records_both_ends_and_its_assumption() -> None:
    check = Estimate(**_fig(-0.18, -0.15), n=100)
    out = bounded_effect(check, 0.06, YES)
    assert out.low is not None and out.high is not None and out.interval is not None
    assert out.low.value == pytest.approx(check.value - 0.06)
    assert out.high.decision_high == pytest.approx(-0.09)
    assert out.low.n == 100
    assert (out.interval.ci_low, out.interval.ci_high) == (
        pytest.approx(-0.25),
        pytest.approx(-0.08),
    )
    assert (out.interval.decision_low, out.interval.decision_high) == (
        pytest.approx(-0.24),
        pytest.approx(-0.09),
    )
    assert "±6 pp" in (out.assumption or "") and out.reading == YES
    assert span(out.interval, 0.9) == "-24.0 to -9.0 pp (90% decision interval)"
    assert bounded_effect(None, 0.06, NA).interval is None
    assert span(None, 0.9) == "not available"
    # written to summary.json and read back as the same record
    back = Bounded.parse(json_value(out))
    assert back == out
