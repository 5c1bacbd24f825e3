"""FINDINGS.md's verdicts: H1 and H2 with the effect, the check, the power and the
sensitivity each was read with, and how many prompts a verdict needs (the context of
``templates/findings.md``).

:func:`sensitivity_words` is also the HTML report's sentence (one wording for both).
"""

from __future__ import annotations

from typing import Any

from tokenlens.analysis.summary_file import Summary
from tokenlens.analysis.summary_verdicts import Check, Hypothesis
from tokenlens.format import (
    HYPOTHESES,
    VERDICT_WORDS,
    code,
    decision_prose,
    interval,
    md,
    num,
    or_missing,
    qty,
)
from tokenlens.format import finite as _finite
from tokenlens.report.findings_runs import family_words

RULE_WORDS = {
    "yes": "yes: the whole decision interval lies below −δ",
    "no": "no: the whole decision interval lies above −δ",
    "unsure": "unsure: the decision interval reaches across −δ",
    "n/a": "no reading: the figure or its interval is missing",
}


def verdicts(s: Summary) -> dict[str, Any]:
    """The rules' settings and one entry per hypothesis (its verdict and what it read)."""
    alpha = s.settings.alpha
    return {
        "delta": num(_finite(s.settings.delta), "pp").lstrip("+"),
        "min_prompts": md(or_missing(s.settings.min_prompts)),
        # None: a summary written before decision intervals (read on the 95% interval)
        "decision_level": None if alpha is None else f"{100 * (1 - 2 * alpha):g}",
        "alpha": None if alpha is None else f"{100 * alpha:g}",
        "rules": code("rules:" + s.settings.rules_hash) if s.settings.rules_hash else "",
        "hypotheses": [_hypothesis(s, key, name) for key, name in HYPOTHESES.items()],
        "prompts_needed": prompts_needed(s),
        "delta_speed": delta_speed(s),
    }


def delta_speed(s: Summary) -> str:
    """δ in speed terms per drafter family and k (summary.json ``margin_in_speed``): the
    tokens per step a Japanese acceptance δ below English costs, and the change of
    speed, by the i.i.d. formula at the English judged rate ("" without it)."""
    if s.margin_in_speed is None or not s.margin_in_speed.families:
        return ""
    parts = []
    for name, per_k in s.margin_in_speed.families.items():
        cells = [
            f"k = {k}: {num(e.difference, 'rate')} tokens per step "
            f"({num(e.relative_speed, 'pp')}% speed) at acceptance "
            f"{num(e.acceptance, 'rate')}"
            for k, e in per_k.items()
            if e.difference is not None
        ]
        if cells:
            parts.append(f"{family_words(name)}: " + "; ".join(cells))
    if not parts:
        return ""
    return (
        "In speed terms, a Japanese acceptance δ below English costs (tokens per step by "
        "the i.i.d. formula (1 − a^(k+1)) / (1 − a) at the English judged acceptance a of "
        "the runs at each k; at equal k the draft cost divides both alike, so the change "
        "of speed does not depend on it): " + ". ".join(parts) + "."
    )


def _hypothesis(s: Summary, key: str, name: str) -> dict[str, Any]:
    h = s.hypotheses.get(key) or Hypothesis()
    verdict = "inconclusive" if h.verdict is None else h.verdict
    power = None
    if h.power is not None and h.power.mde is not None:
        power = {
            "not_estimable": "",
            "mde": qty(-float(h.power.mde), "pp"),
            "rule": md(h.power.rule) if h.power.rule else "",
            "at": "; ".join(
                f"a {qty(-float(size), 'pp')} effect is found {num(value, 'share')} of the time"
                for size, value in (h.power.power_at or {}).items()
                if value is not None
            ),
        }
    elif h.power is not None and h.power.not_estimable and h.control and h.control.reason:
        power = {"not_estimable": "not estimable: the effect is not read (Control above)"}
    return {
        "key": key,
        "name": name,
        "words": md(VERDICT_WORDS.get(verdict, verdict)),
        "statement": md(h.statement) if h.statement and verdict != "insufficient_data" else "",
        "effect": None
        if not h.estimand
        else {
            "estimand": md(h.estimand),
            "family": family_words(h.family),
            "figure": _read(s, h, None if h.bounded is not None else h.reading) + _bounded(s, h),
        },
        "check": None
        if h.check is None
        else {"name": md(h.check.name), "figure": _read(s, h.check, h.check.reading)},
        "power": power,
        "control": _control(h),
        "sensitivity": sensitivity_words(h),
        "evidence": md(or_missing(h.evidence)),
        "caveat": md(h.caveat) if h.caveat else "",
    }


def _control(h: Hypothesis) -> str:
    """H2's control, checked before it is read: the range, where it comes from, the
    measured violation and whether the difference was read ("" for H1)."""
    c = h.control
    if c is None or c.range is None:
        return ""
    head = (
        f"the difference in differences is read only while the training-free drafter's "
        f"within-confidence gap (the measured parallel-trends violation) lies within "
        f"±{100 * c.range:g} pp ({md(c.source or '')})"
    )
    if c.reason:
        return (
            f"{head}; {md(c.reason)}: **not read**; the effect is bounded from the check "
            f"instead (± {100 * c.range:g} pp, docs/analysis.md, “H2 without its control”)."
        )
    measured = f" ({num(c.violation, 'pp')} pp)" if c.violation is not None else ""
    return f"{head}; here it does{measured}: read."


def _bounded(s: Summary, h: Hypothesis) -> str:
    """``; bounded instead, if …: -24.1 to -8.7 pp (90% decision interval) → yes: …``
    where H2's control does not hold ("" otherwise)."""
    b = h.bounded
    if b is None or b.interval is None:
        return ""
    span = decision_prose(
        b.interval.decision_low, b.interval.decision_high, s.settings.decision_level
    )
    text = f"; bounded instead ({md(b.assumption or '')}): {span or 'not available'}"
    if b.reading is not None:
        text += f" → {RULE_WORDS.get(str(b.reading), md(b.reading))}"
    return text


def _read(s: Summary, fig: Hypothesis | Check, reading: str | None) -> str:
    """``-6.2 pp [-7.9, -4.6] (90% decision interval: -7.6 to -4.8 pp) → yes: …``: the
    figure, the interval the rule read, and how the rule read it against −δ."""
    stat = fig.effect_estimate if isinstance(fig, Hypothesis) else fig
    text = interval(stat, "pp")
    decision = decision_prose(fig.decision_low, fig.decision_high, s.settings.decision_level)
    if decision:
        text += f" ({decision})"
    if reading is not None:
        text += f" → {RULE_WORDS.get(str(reading), md(reading))}"
    return text


def sensitivity_words(h: Hypothesis) -> str:
    """How the verdict moves: the δ where it flips, on vLLM's all-draft-token gap, per
    k, and under the first rules' 95% reading (the rule changed after calibration)."""
    sens = h.sensitivity
    if sens is None or sens.not_computed:
        return ""
    parts = []
    for side, word in ((sens.flip_below, "below"), (sens.flip_above, "above")):
        if side is not None:
            parts.append(f"δ {word} {100 * side[0]:.2f} pp: {_words(side[1])}")
    if not parts:
        parts.append("any δ up to 50 pp: the same")
    text = "it would read, at " + "; at ".join(parts)
    all_tokens = sens.all_tokens.verdict if sens.all_tokens is not None else None
    text += f"; on vLLM's all-draft-token gap: {_words(all_tokens)}"
    length = sens.length_standardised
    if length is not None and length.verdict is not None:
        gap = length.gap
        text += (
            "; on the judged gap standardised by token byte length"
            + (f" ({num(gap.value, 'pp')} pp)" if gap is not None and gap.value is not None else "")
            + f": {_words(length.verdict)}"
        )
    if sens.per_k:
        per = ", ".join(f"k = {k}: {_words(e.verdict)}" for k, e in sens.per_k.items())
        text += f"; each k alone: {per}"
    changed = sens.previous is not None and sens.previous != h.verdict
    text += f"; under the first rules' 95% reading: {_words(sens.previous)}" + (
        f", not {_words(h.verdict)}: the rules were changed to the 90% decision interval "
        "after the test bed's power was seen, and that change decides this verdict."
        if changed
        else " (the rules were changed to the 90% decision interval after the test bed's "
        "power was seen; this verdict does not depend on it)."
    )
    return text


def _words(verdict: str | None) -> str:
    return md(VERDICT_WORDS.get(str(verdict), str(verdict)))


def prompts_needed(s: Summary) -> dict[str, Any] | None:
    """How many prompts a verdict needs: the rule's minimum when this study has fewer,
    and the prompts per language that 80% power needs at the measured variability
    (None: neither applies)."""
    minimum = s.settings.min_prompts
    have = min(s.prompts.values()) if s.prompts else None
    parts = []
    for key in HYPOTHESES:
        h = s.hypotheses.get(key)
        needed = (h.power.prompts_needed if h is not None and h.power is not None else None) or {}
        sizes = [
            f"{num(float(size), 'pp').lstrip('+')} pp: ~{md(n)}" for size, n in needed.items() if n
        ]
        if sizes:
            parts.append(f"{key} effect of " + ", ".join(sizes))
    short = have is not None and minimum is not None and have < minimum
    if not parts and not short:
        return None
    return {
        "have": md(have) if short else "",
        "minimum": md(minimum),
        "power": "; ".join(parts),
    }
