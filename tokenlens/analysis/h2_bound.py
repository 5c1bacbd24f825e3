"""H2 where its control does not hold: the effect bounded from the trained drafters' own
within-confidence gap (docs/analysis.md, "H2 without its control"; the reading itself is
:func:`tokenlens.analysis.rules.bounded_reading`)."""

from __future__ import annotations

from typing import Any


def bounded_effect(check: dict[str, Any] | None, bound: float, reading: str) -> dict[str, Any]:
    """H2's effect where its control does not hold: the within-confidence gap shifted by
    ±``bound`` (``low``: the effect if the text alone made every drafter ``bound`` better
    on Japanese; ``high``: ``bound`` worse) and how :func:`bounded_reading` read it."""

    def shift(by: float) -> dict[str, Any] | None:
        if check is None or check.get("value") is None:
            return None
        keys = ("value", "ci_low", "ci_high", "decision_low", "decision_high")
        out = {k: (None if check.get(k) is None else float(check[k]) + by) for k in keys}
        return out | {"n": check.get("n")}

    low, high = shift(-bound), shift(+bound)
    interval = None
    if low is not None and high is not None:
        interval = {
            "ci_low": low["ci_low"],
            "ci_high": high["ci_high"],
            "decision_low": low["decision_low"],
            "decision_high": high["decision_high"],
        }
    return {
        "bound": bound,
        "low": low,
        "high": high,
        "interval": interval,
        "reading": reading,
        "assumption": "the within-confidence Japanese gap any drafter would show for "
        f"reasons of the text alone lies within ±{100 * bound:g} pp (the range the "
        "n-gram control was measured under); the n-gram drafter's own gap here is outside "
        "it and is not used",
    }


def span(interval: dict[str, Any] | None, level: float) -> str:
    """``-22.4 to -8.7 pp (90% decision interval)``; ``not available`` for None."""
    if interval is None or interval.get("decision_low") is None:
        return "not available"
    lo, hi = 100 * float(interval["decision_low"]), 100 * float(interval["decision_high"])
    return f"{lo:+.1f} to {hi:+.1f} pp ({level:.0%} decision interval)"
