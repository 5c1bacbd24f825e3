"""H2 where its control does not hold: the effect bounded from the trained drafters' own
within-confidence gap (docs/analysis.md, "H2 without its control"; the reading itself is
:func:`tokenlens.analysis.rules.bounded_reading`)."""

from __future__ import annotations

from dataclasses import replace

from tokenlens.analysis.summary_figures import Estimate
from tokenlens.analysis.summary_verdicts import Bounded

BOUNDED_LABEL = (
    "bounded effect, the trained drafters' within-confidence gap ± {:g} pp (the n-gram "
    "control does not hold)"
)


def _shift(check: Estimate, by: float) -> Estimate:
    def add(x: float | None) -> float | None:
        return None if x is None else float(x) + by

    return replace(
        check,
        value=add(check.value),
        ci_low=add(check.ci_low),
        ci_high=add(check.ci_high),
        decision_low=add(check.decision_low),
        decision_high=add(check.decision_high),
    )


def bounded_effect(check: Estimate | None, bound: float, reading: str) -> Bounded:
    """H2's effect where its control does not hold: ``check`` (the trained drafters'
    within-confidence gap) shifted by ∓``bound`` (``low``: the effect if the text alone
    made every drafter ``bound`` better on Japanese; ``high``: ``bound`` worse), the
    union's interval, and how :func:`bounded_reading` read it."""
    assumption = (
        "the within-confidence Japanese gap any drafter would show for reasons of the text "
        f"alone lies within ±{100 * bound:g} pp (the range the n-gram control was measured "
        "under); the n-gram drafter's own gap here is outside it and is not used"
    )
    if check is None or check.value is None:
        return Bounded(bound=bound, reading=reading, assumption=assumption)
    low, high = _shift(check, -bound), _shift(check, +bound)
    interval = Estimate(
        ci_low=low.ci_low,
        ci_high=high.ci_high,
        decision_low=low.decision_low,
        decision_high=high.decision_high,
    )
    return Bounded(bound, low, high, interval, reading, assumption)


def span(interval: Estimate | None, level: float) -> str:
    """``-22.4 to -8.7 pp (90% decision interval)``; ``not available`` for None."""
    if interval is None or interval.decision_low is None or interval.decision_high is None:
        return "not available"
    lo, hi = 100 * float(interval.decision_low), 100 * float(interval.decision_high)
    return f"{lo:+.1f} to {hi:+.1f} pp ({level:.0%} decision interval)"


def bounded_sentence(bounded: Bounded | None, bound: float, level: float) -> str:
    """The evidence's sentence where H2's control does not hold."""
    return (
        " The difference in differences is not read: the n-gram control does not hold "
        "here. Bounded instead: if the within-confidence gap any drafter would show for "
        f"reasons of the text alone lies within ±{100 * bound:g} pp, the effect lies within "
        f"the trained drafters' within-confidence gap ± {100 * bound:g} pp: "
        f"{span(bounded.interval if bounded else None, level)}."
    )
