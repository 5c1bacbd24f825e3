"""How a reading is worded against its margin: the one rule for every view.

A reading never says more than its test: each verdict is a one-sided test against the
margin δ (docs/analysis.md), so "no deficit" means *not worse by more than δ*, never
"not worse at all", and a sentence names the rows, the runs and the interval it read:

    Japanese is not worse than English by more than δ = 2 pp (judged positions, runs
    of draft_model at k = 1–5, 90% decision interval -1.8 to +2.0 pp)

summary.json's evidence sentences, tables.md, the HTML report and FINDINGS.md all take
their wording from here. Standard library only (the analysis writes these sentences,
the report layer prints them).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tokenlens.format import finite, num

YES, NO, UNSURE, NA = "yes", "no", "unsure", "n/a"

# What a verdict cannot see, said next to it (summary.json's caveat of H1 and H2).
CONFIDENCE_CAVEAT = (
    "The target's own confidence also reflects the target's Japanese training data: "
    "'Japanese is less predictable for the target' is what the composition by confidence "
    "measures, whether that comes from the text or from the target's data."
)
TOKEN_CAVEAT = (
    "A tokenization cost that shows at equal target confidence (the drafter missing byte "
    "fragments or script changes where the target is sure) is not part of the composition: "
    "H1 read this way misses it (docs/bench_verdicts.md, token_hurts)."
)
H2_CAVEAT = (
    "The contrast assumes that, without a training-data effect, the Japanese gap at equal "
    "target confidence would be the same for both drafters on the probability scale "
    "(parallel trends); the n-gram drafter's gap also reflects repetition in the text, and "
    "a violation moves the difference by as much. The difference is read only while the "
    "n-gram drafter's own within-confidence gap, the measured violation, lies within the "
    "range the verdict benchmark measured the rule under (±6 pp, docs/bench_verdicts.md); "
    "outside it the difference is not estimable, and the effect is bounded instead by the "
    "trained drafters' own within-confidence gap ± that range (docs/analysis.md, 'H2 "
    "without its control'): an assumption about the gap the text alone would give any "
    "drafter, not a measurement. "
    "A within-confidence deficit of the trained drafter alone reads as H2 whether it comes "
    "from its training data or from how it handles the tokenizer."
)


def margin(delta: float) -> str:
    """``δ = 2 pp``."""
    return f"δ = {100 * delta:g} pp"


def runs_phrase(runs: Iterable[tuple[str, int]]) -> str:
    """``runs of draft_model at k = 1–5 and ngram at k = 3`` from (method, k) pairs."""
    by_method: dict[str, list[int]] = {}
    for method, k in runs:
        by_method.setdefault(str(method), [])
        if int(k) not in by_method[str(method)]:
            by_method[str(method)].append(int(k))
    parts = [f"{method} at k = {_ks(sorted(ks))}" for method, ks in by_method.items()]
    if not parts:
        return "no runs"
    joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"runs of {joined}"


def _ks(ks: list[int]) -> str:
    if len(ks) >= 3 and ks == list(range(ks[0], ks[-1] + 1)):
        return f"{ks[0]}–{ks[-1]}"
    return ", ".join(str(k) for k in ks)


def interval_words(low: Any, high: Any, level: Any) -> str:
    """``90% decision interval -1.8 to +2.0 pp`` (empty when a bound is missing)."""
    lo, hi = finite(low), finite(high)
    if lo is None or hi is None:
        return ""
    lev = finite(level)
    label = f"{100 * lev:g}% decision interval" if lev is not None else "decision interval"
    return f"{label} {num(lo, 'pp')} to {num(hi, 'pp')} pp"


def reading_sentence(
    reading: str,
    delta: float,
    scope: str,
    low: Any,
    high: Any,
    level: Any,
    subject: str = "Japanese is",
    than: str = " than English",
) -> str:
    """One reading against the margin, with the rows, runs and interval it read.

    ``reading`` is the rule's answer to "is Japanese worse by more than δ?": ``yes``,
    ``no``, ``unsure`` or ``n/a``.
    """
    where = ", ".join(x for x in (scope, interval_words(low, high, level)) if x)
    where = f" ({where})" if where else ""
    m = margin(delta)
    if reading == YES:
        return f"{subject} worse{than} by more than {m}{where}"
    if reading == NO:
        return f"{subject} not worse{than} by more than {m}{where}"
    if reading == UNSURE:
        return (
            f"{subject} neither shown worse{than} by more than {m} nor shown not to be: "
            f"the decision interval reaches across −δ{where}"
        )
    return f"no reading against {m}: the figure or its interval is missing{where}"


def no_deficit_sentence(delta: float, scope: str, gate: Mapping[str, Any], level: Any) -> str:
    """The ``no_japanese_deficit`` verdict, worded against its margin."""
    return (
        reading_sentence(
            NO, delta, scope, gate.get("decision_low"), gate.get("decision_high"), level
        )
        + ": within the margin there is no deficit to explain"
    )
