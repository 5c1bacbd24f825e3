"""The verdict rules themselves: how a figure's interval reads against δ, and how an
effect and its check combine into a verdict (docs/analysis.md, "Verdict rules").

Each rule reads one effect (Japanese minus English, negative = Japanese worse) and one
check, both on judged rows of the same runs, against a practical threshold δ:
*yes* when the whole decision interval lies below −δ, *no* when it lies above −δ,
*unsure* otherwise, *n/a* when the figure or its interval is missing (a null or
zero-width interval never answers yes or no). The decision interval is the
(1 − 2α) interval (90% at the default α = 0.05), so each reading is a one-sided test
at level α against the margin δ: two one-sided tests, the TOST convention of
equivalence testing. Reported intervals stay at 95%. (The first rules read the 95%
interval: a 2.5% one-sided test *and* a margin, under which H2's power at 30 prompts
per language and a planted 10 pp was 72%; see docs/analysis.md.)

H1's rule is symmetric: the effect proposes, and the check can veto either answer
(:func:`combine`). H2's rule is the conjunction (:func:`conjoin`). What the figures
are, and the verdicts built from them: :mod:`tokenlens.analysis.verdicts`. The code of
:func:`tri`, :func:`combine`, :func:`conjoin` and :func:`verdict_of` is hashed into
the analysis signature (:func:`tokenlens.analysis.verdicts.rules_identity`): a change
to them is a change of the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenlens.analysis.bootstrap import DECISION_LEVEL
from tokenlens.engine.methods import FREE as FREE
from tokenlens.engine.methods import TRAINED as TRAINED

SUPPORTED, NOT_SUPPORTED = "supported", "not_supported"
NO_DEFICIT, INCONCLUSIVE, INSUFFICIENT = "no_japanese_deficit", "inconclusive", "insufficient_data"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, NO_DEFICIT, INCONCLUSIVE, INSUFFICIENT)
YES, NO, UNSURE, NA = "yes", "no", "unsure", "n/a"
POWER = 0.80
CONTROL_RANGE = 0.06
"""H2's control is read only while the training-free drafter's within-confidence
Japanese gap (the measured violation of parallel trends: with no training data to lack,
it is what the control adds to the difference in differences) stays within ±6 pp: the
largest violations the verdict benchmark planted and measured the rule under
(``h2_ngram-6`` … ``h2_ngram+6``, ``null_ngram+6``; docs/bench_verdicts.md)."""
CONTROL_SOURCE = (
    "docs/bench_verdicts.md: the largest parallel-trends violations the verdict benchmark "
    "planted and measured the rule under (h2_ngram-6 to h2_ngram+6, null_ngram+6)"
)


@dataclass(frozen=True)
class Rules:
    """Thresholds of the verdict rules (recorded in summary.json)."""

    delta: float = 0.02
    min_prompts: int = 30
    power_effects: tuple[float, ...] = (0.05, 0.10)
    alpha: float = (1.0 - DECISION_LEVEL) / 2.0
    control_range: float = CONTROL_RANGE

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 0.5:
            raise ValueError(f"alpha must lie in (0, 0.5), not {self.alpha}")

    @property
    def decision_level(self) -> float:
        """The level of the interval the readings use: 1 − 2α."""
        return 1.0 - 2.0 * self.alpha

    def to_json(self) -> dict[str, Any]:
        return {
            "delta": self.delta,
            "alpha": self.alpha,
            "decision_level": self.decision_level,
            "min_prompts": self.min_prompts,
            "power": POWER,
            "power_effects": list(self.power_effects),
            "control_range": self.control_range,
        }


def decision_bounds(effect: dict[str, Any]) -> tuple[Any, Any]:
    """The interval a reading uses: ``decision_low/high``; an effect without them (a
    summary written before decision intervals, a hand-made figure) falls back to its
    reported interval."""
    if "decision_low" in effect or "decision_high" in effect:
        return effect.get("decision_low"), effect.get("decision_high")
    return effect.get("ci_low"), effect.get("ci_high")


def tri(effect: dict[str, Any] | None, delta: float) -> str:
    """``yes`` / ``no`` / ``unsure`` / ``n/a`` for "Japanese is worse by more than delta",
    read from the effect's decision interval (:func:`decision_bounds`)."""
    if effect is None:
        return NA
    lo_, hi_ = decision_bounds(effect)
    if lo_ is None or hi_ is None:
        return NA
    lo, hi = float(lo_), float(hi_)
    if not hi > lo:  # a zero-width interval is not evidence
        return NA
    if hi < -delta:
        return YES
    if lo > -delta:
        return NO
    return UNSURE


def combine(effect: str, check: str | None) -> str:
    """The symmetric veto rule (``check`` None: there is no check)."""
    if effect == YES and check != NO:
        return SUPPORTED
    if effect == NO and check != YES:
        return NOT_SUPPORTED
    return INCONCLUSIVE


def conjoin(effect: str, check: str) -> str:
    """The conjunction rule: ``supported`` needs the effect *and* the check.

    H2's effect (the difference in differences) also moves when the n-gram drafter is
    better on Japanese while the trained drafter has no gap at all; under the veto rule
    that read as H2 ``supported`` in 86% of such simulated studies (bench_verdicts). The
    trained drafter's own within-confidence gap must be there too. ``not_supported``
    when the check says no (the trained drafter has no gap at equal confidence, whatever
    the n-gram drafter does), or the effect says no and the check does not say yes (a
    gap both drafters share is not a training-data effect, but not its absence either).
    """
    if effect == YES and check == YES:
        return SUPPORTED
    if check == NO or (effect == NO and check != YES):
        return NOT_SUPPORTED
    return INCONCLUSIVE


def control_holds(violation: Mapping[str, Any] | None, bound: float) -> str | None:
    """None when H2's control may be read: the training-free drafter's within-confidence
    gap (``violation``, the measured violation of parallel trends) lies inside
    ±``bound``; else why not, with the measured violation and its decision interval.

    The point estimate decides, not the whole interval: at 30 prompts per language the
    control's decision interval is about ±4.5 pp wide, so asking it to lie inside ±6 pp
    would refuse the control in many studies where parallel trends hold. A violation
    the data cannot estimate leaves the control unchecked, and so unread."""
    if violation is None or violation.get("value") is None:
        return "the control's assumption cannot be checked here: its violation is not estimable"
    value = float(violation["value"])
    if abs(value) <= bound:
        return None
    lo, hi = decision_bounds(dict(violation))
    within = (
        f" (decision interval {100 * float(lo):+.1f} to {100 * float(hi):+.1f} pp)"
        if lo is not None and hi is not None
        else ""
    )
    return (
        "the control's assumption does not hold here: the training-free drafter's "
        f"within-confidence gap is {100 * value:+.1f} pp{within}, outside ±{100 * bound:g} pp, "
        "the range where the verdict benchmark measured the control"
    )


def apply_control(contrast: dict[str, Any], bound: float) -> dict[str, Any]:
    """The H2 contrast with its difference read only where the control holds
    (:func:`control_holds`): ``control`` records the range, where it comes from, the
    measured violation and the reason; outside the range ``difference`` is null with
    that reason, its computed value kept under ``unchecked``."""
    violation = contrast.get("within_training_free")
    difference = contrast.get("difference") or {}
    reason = control_holds(violation, bound)
    contrast["control"] = {
        "range": bound,
        "source": CONTROL_SOURCE,
        "violation": (violation or {}).get("value"),
        "holds": reason is None,
        "reason": reason,
    }
    if reason is not None and difference.get("value") is not None:
        contrast["difference"] = {
            "value": None,
            "ci_low": None,
            "ci_high": None,
            "n": difference.get("n"),
            "not_estimable": reason,
            "violation": (violation or {}).get("value"),
            "unchecked": difference,
        }
    return contrast


DECISION_KEYS = ("decision_low", "decision_high")
REPORTED_KEYS = ("ci_low", "ci_high")


def read(
    figure: Mapping[str, Any] | None, delta: float, keys: tuple[str, str] = DECISION_KEYS
) -> str:
    """:func:`tri` on the interval ``keys`` of ``figure`` (the decision interval, or
    with :data:`REPORTED_KEYS` the reported 95% interval: the first rules' reading)."""
    if figure is None:
        return NA
    return tri({"ci_low": figure.get(keys[0]), "ci_high": figure.get(keys[1])}, delta)


def bounded_reading(
    check: Mapping[str, Any] | None,
    bound: float,
    delta: float,
    keys: tuple[str, str] = DECISION_KEYS,
) -> str:
    """H2's effect read where its control does not hold: the difference in differences
    is then known only to lie within ``bound`` of the trained drafter's within-confidence
    gap (``check``), if the gap any drafter would show there for reasons of the text
    alone lies within ±``bound`` (the range the control was measured under). *yes* when
    even the least negative value of that range is beyond −δ (decision interval's upper
    end + ``bound`` < −δ), *no* when even the most negative is not (lower end − ``bound``
    > −δ), else *unsure*; *n/a* without an interval. At most α of studies whose true
    within gap lies in ±``bound`` read *yes*: ``supported`` keeps its error rate under
    the stated assumption (docs/analysis.md, "H2 without its control")."""
    if check is None:
        return NA
    lo_, hi_ = check.get(keys[0]), check.get(keys[1])
    if lo_ is None or hi_ is None:
        return NA
    lo, hi = float(lo_), float(hi_)
    if not hi > lo:
        return NA
    if hi + bound < -delta:
        return YES
    if lo - bound > -delta:
        return NO
    return UNSURE


def verdict_of(
    gate: Mapping[str, Any] | None,
    effect: Mapping[str, Any] | None,
    check: Mapping[str, Any] | None,
    delta: float,
    both: bool,
    keys: tuple[str, str] = DECISION_KEYS,
    bound: float | None = None,
) -> str:
    """A verdict from its three figures alone: the no-deficit gate (the family's gap),
    then the effect and the check by the veto rule (``both``: the conjunction rule).
    ``bound``: H2's control did not hold, so the effect is read from the check by
    :func:`bounded_reading`. The same rules as :func:`decide` (the minimum-prompts gate
    aside), so that a verdict can be recomputed at another δ, on another gap or on the
    reported interval."""
    if read(gate, delta, keys) == NO:
        return NO_DEFICIT
    if bound is not None:
        reading = bounded_reading(check, bound, delta, keys)
    else:
        reading = read(effect, delta, keys)
    check_reading = read(check, delta, keys) if check is not None else None
    return conjoin(reading, check_reading or NA) if both else combine(reading, check_reading)
