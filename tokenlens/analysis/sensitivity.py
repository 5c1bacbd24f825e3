"""How much a verdict depends on the choices behind it (docs/analysis.md,
"Sensitivity, next to every verdict").

:func:`add_sensitivity` takes the decided hypotheses and the :class:`Parts` they read
and returns each with its :class:`~tokenlens.analysis.summary_verdicts.Sensitivity`:
``flip`` (the nearest δ below and above where the verdict changes, within 50 pp),
``all_tokens`` and ``length_standardised`` (the no-deficit gate on another gap),
``per_k`` (each k's runs alone, same replicates) and ``previous_rule`` (the first rules'
95% reading); only ``not_computed`` where there is no verdict to test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler
from tokenlens.analysis.columns import labels
from tokenlens.analysis.decompose import Support
from tokenlens.analysis.parts import Parts, compute_parts
from tokenlens.analysis.rules import (
    DECISION_KEYS,
    FREE,
    INSUFFICIENT,
    REPORTED_KEYS,
    TRAINED,
    Rules,
    decision_bounds,
    verdict_of,
)
from tokenlens.analysis.summary_fields import typed
from tokenlens.analysis.summary_verdicts import Hypothesis, Sensitivity
from tokenlens.analysis.verdicts import as_block, decide

RULE_CHANGE = (
    "The rules first read the 95% interval (a one-sided test at 2.5% against δ); they "
    "were changed to the 90% decision interval (one-sided 5%) after the test bed's power "
    "had been measured, and that change also changed this study's verdicts where the "
    "two readings differ (docs/analysis.md, 'How the H2 rule got there')."
)
LIMIT = 0.5  # no δ beyond 50 pp is considered


def figures(parts: Parts, hypothesis: str) -> dict[str, Any]:
    """The gate (judged and all-token gap), effect and check a hypothesis reads, and
    H2's bound where its control does not hold (:func:`rules.bounded_reading`)."""
    bound = None
    if hypothesis == "H1":
        fam = TRAINED if TRAINED in parts.families else FREE
        block = parts.families.get(fam)
        effect = block.confidence.composition if block and block.confidence else None
        free = parts.families.get(FREE)
        other = free.confidence if fam == TRAINED and free is not None else None
        check = other.composition if other else None
        both = False
    else:
        block = parts.families.get(TRAINED)
        effect = parts.contrast.difference if parts.contrast else None
        check = parts.contrast.within_trained if parts.contrast else None
        both = True
        control = parts.contrast.control if parts.contrast else None
        bound = control.range if control is not None and control.reason else None
    return {  # as the rule functions read them (verdicts.as_block)
        "gate": as_block(block.gap_judged if block else None),
        "gate_all": as_block(block.gap_all if block else None),
        "gate_length": as_block(block.gap_length_standardised if block else None),
        "effect": as_block(effect),
        "check": as_block(check),
        "both": both,
        "bound": bound,
    }


def _bounds(figure: Mapping[str, Any] | None, keys: tuple[str, str] | None) -> list[float]:
    if figure is None:
        return []
    lo, hi = (
        decision_bounds(dict(figure))
        if keys is None
        else (figure.get(keys[0]), figure.get(keys[1]))
    )
    return [-float(x) for x in (lo, hi) if x is not None and np.isfinite(float(x))]


def read_as(
    f: Mapping[str, Any],
    gate: Mapping[str, Any] | None,
    delta: float,
    keys: tuple[str, str] = DECISION_KEYS,
) -> str:
    """:func:`verdict_of` on ``f``'s effect, check and bound with another ``gate``, δ or
    interval (``keys``: :data:`REPORTED_KEYS` for the first rules' reading)."""
    return verdict_of(gate, f["effect"], f["check"], delta, f["both"], keys, f.get("bound"))


def _bounded_points(check: Mapping[str, Any] | None, bound: float | None) -> list[float]:
    """The δ values where :func:`bounded_reading` of ``check`` changes (none without a
    bound): −(upper end) − bound and −(lower end) + bound."""
    if check is None or bound is None:
        return []
    lo, hi = decision_bounds(dict(check))
    out = []
    if hi is not None and np.isfinite(float(hi)):
        out.append(-float(hi) - bound)
    if lo is not None and np.isfinite(float(lo)):
        out.append(-float(lo) + bound)
    return out


def flips(f: Mapping[str, Any], delta: float) -> dict[str, Any]:
    """The nearest δ below and above ``delta`` where :func:`verdict_of` changes."""

    def at(d: float) -> str:
        return read_as(f, f["gate"], d)

    now = at(delta)
    points = sorted(
        {
            b
            for fig in (f["gate"], f["effect"], f["check"])
            for b in _bounds(fig, None)
            if 0.0 < b < LIMIT
        }
        | {b for b in _bounded_points(f["check"], f.get("bound")) if 0.0 < b < LIMIT}
    )
    eps = 1e-9
    below = None
    for b in reversed([p for p in points if p < delta]):
        if at(b - eps) != now:
            below = {"delta": b, "verdict": at(b - eps)}
            break
    above = None
    for b in [p for p in points if p >= delta]:
        if at(b + eps) != now:
            above = {"delta": b, "verdict": at(b + eps)}
            break
    return {"delta": delta, "verdict": now, "below": below, "above": above}


def _figure(fig: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The parts of a figure a sensitivity entry shows."""
    if fig is None:
        return None
    keys = ("value", "ci_low", "ci_high", "decision_low", "decision_high", "not_estimable")
    return {k: fig.get(k) for k in keys if k in fig}


def per_k(
    frame: pd.DataFrame, rs: Resampler, rules: Rules, support: Support
) -> dict[str, dict[str, Any]]:
    """``{k: {runs, H1: {...}, H2: {...}}}``: each k's runs analysed on their own."""
    out: dict[str, dict[str, Any]] = {}
    if "k" not in frame:
        return out
    ks = np.asarray(frame["k"].to_numpy(), dtype=np.int64)
    values = sorted({int(k) for k in ks})
    if len(values) < 2:
        return out
    for k in values:
        mask = ks == k
        sub = frame.loc[mask].reset_index(drop=True)
        sub_rs = rs.restricted(mask)
        parts = compute_parts(sub, sub_rs, support, rules.control_range)
        decided = decide(sub, sub_rs, rules, parts)
        out[str(k)] = k_entry(parts, decided, sorted(set(labels(sub, "run"))), rules)
    return out


def k_entry(
    parts: Parts, decided: Mapping[str, Hypothesis], runs: list[str], rules: Rules
) -> dict[str, Any]:
    """One k's entry of :func:`per_k`: its runs, and per hypothesis the verdict of its
    runs alone (``parts`` and ``decided``, computed from them), with all tokens, and
    the figures read."""
    entry: dict[str, Any] = {"runs": runs}
    for name in ("H1", "H2"):
        f = figures(parts, name)
        verdict = str(decided[name].verdict)
        all_tokens = verdict if verdict == INSUFFICIENT else read_as(f, f["gate_all"], rules.delta)
        entry[name] = {
            "verdict": verdict,
            "verdict_all_tokens": all_tokens,
            "gap": _figure(f["gate"]),
            "gap_all": _figure(f["gate_all"]),
            "effect": _figure(f["effect"]),
            "check": _figure(f["check"]),
        }
    return entry


def _length(f: Mapping[str, Any], rules: Rules) -> dict[str, Any]:
    """The verdict with the no-deficit gate on the length-standardised gap (null, with
    the reason, where that gap is not estimable)."""
    gate = f["gate_length"]
    if gate is None or gate.get("value") is None:
        why = (gate or {}).get("not_estimable") or "no length-standardised gap"
        return {"verdict": None, "not_estimable": why, "gap": _figure(gate)}
    verdict = read_as(f, gate, rules.delta)
    return {"verdict": verdict, "gap": _figure(gate)}


def add_sensitivity(
    hypotheses: dict[str, Hypothesis],
    frame: pd.DataFrame,
    rs: Resampler,
    rules: Rules,
    support: Support,
    parts: Parts,
) -> dict[str, Hypothesis]:
    """Each hypothesis of ``hypotheses`` with its ``sensitivity``."""
    return with_sensitivity(hypotheses, parts, per_k(frame, rs, rules, support), rules)


def with_sensitivity(
    hypotheses: dict[str, Hypothesis],
    parts: Parts,
    ks: dict[str, dict[str, Any]],
    rules: Rules,
) -> dict[str, Hypothesis]:
    """Each hypothesis with its ``sensitivity``, from the ``parts`` it read (their
    families' length-standardised gaps included) and the entries of :func:`per_k`."""
    return {
        name: replace(h, sensitivity=_sensitivity(name, h, parts, ks, rules))
        for name, h in hypotheses.items()
    }


def _sensitivity(
    name: str, h: Hypothesis, parts: Parts, ks: dict[str, dict[str, Any]], rules: Rules
) -> Sensitivity | None:
    f = figures(parts, name)
    if h.verdict == INSUFFICIENT or f["effect"] is None:
        return Sensitivity(not_computed="no verdict to test (too little data)")
    return typed(
        Sensitivity,
        {
            "flip": flips(f, rules.delta),
            "all_tokens": {
                "verdict": read_as(f, f["gate_all"], rules.delta),
                "gap": _figure(f["gate_all"]),
            },
            "length_standardised": _length(f, rules),
            "per_k": {k: entry[name] | {"runs": entry["runs"]} for k, entry in ks.items()},
            "previous_rule": {
                "verdict": read_as(f, f["gate"], rules.delta, REPORTED_KEYS),
                "level": 0.95,
                "note": RULE_CHANGE,
            },
        },
    )
