"""How much a verdict depends on the choices behind it.

A verdict reads three figures (the family's judged gap for the no-deficit gate, an
effect and a check) against a margin δ on the 90% decision interval. Each of those is a
choice, fixed before the full study was analysed but not beyond question, so every
verdict in summary.json carries (``hypotheses.H*.sensitivity``):

- ``flip``: the δ nearest to the rule's, below and above, at which the verdict would
  change, and what it would read there (the verdict is constant between the bounds of
  the three decision intervals, so the δ values to try are those bounds);
- ``all_tokens``: the verdict when the no-deficit gate reads vLLM's rate over all draft
  tokens instead of the judged positions (the rate vLLM reports; the positions after a
  step's first rejection were never compared with the target, which is why the rule
  reads judged positions);
- ``length_standardised``: the verdict when the no-deficit gate reads the judged gap
  standardised by token byte length (:mod:`tokenlens.analysis.standardise`: Japanese
  tokens are shorter, and acceptance falls with length in both languages);
- ``per_k``: the verdict of each k alone (the runs with that k, as ``tokenlens analyze``
  on them would give it, with the same bootstrap replicates), judged and all-token;
- ``previous_rule``: the verdict under the first rules' reading, the 95% interval
  (a one-sided 2.5% test). The rules moved to the 90% decision interval after the test
  bed's power was measured (docs/analysis.md, "How the H2 rule got there"): a change
  made after calibration, which a reader should see next to every verdict it decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler
from tokenlens.analysis.decompose import Support
from tokenlens.analysis.rules import (
    FREE,
    INSUFFICIENT,
    REPORTED_KEYS,
    TRAINED,
    Rules,
    decision_bounds,
    verdict_of,
)
from tokenlens.analysis.verdicts import Parts, compute_parts, decide

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
        block = parts.families.get(fam) or {}
        effect = (block.get("confidence") or {}).get("composition")
        other = (parts.families.get(FREE) or {}).get("confidence") if fam == TRAINED else None
        check = other.get("composition") if other else None
        both = False
    else:
        block = parts.families.get(TRAINED) or {}
        contrast = parts.contrast or {}
        effect = contrast.get("difference")
        check = contrast.get("within_trained")
        both = True
        control = contrast.get("control") or {}
        bound = control.get("range") if control.get("reason") else None
    return {
        "gate": block.get("gap_judged"),
        "gate_all": block.get("gap_all"),
        "gate_length": block.get("gap_length_standardised"),
        "effect": effect,
        "check": check,
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
        return verdict_of(f["gate"], f["effect"], f["check"], d, f["both"], bound=f.get("bound"))

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
        entry: dict[str, Any] = {"runs": sorted(set(sub["run"].astype(str)))}
        for name in ("H1", "H2"):
            f = figures(parts, name)
            verdict = decided[name]["verdict"]
            all_tokens = (
                verdict
                if verdict == INSUFFICIENT
                else verdict_of(
                    f["gate_all"],
                    f["effect"],
                    f["check"],
                    rules.delta,
                    f["both"],
                    bound=f.get("bound"),
                )
            )
            entry[name] = {
                "verdict": verdict,
                "verdict_all_tokens": all_tokens,
                "gap": _figure(f["gate"]),
                "gap_all": _figure(f["gate_all"]),
                "effect": _figure(f["effect"]),
                "check": _figure(f["check"]),
            }
        out[str(k)] = entry
    return out


def _length(f: Mapping[str, Any], rules: Rules) -> dict[str, Any]:
    """The verdict with the no-deficit gate on the length-standardised gap (null, with
    the reason, where that gap is not estimable)."""
    gate = f["gate_length"]
    if gate is None or gate.get("value") is None:
        why = (gate or {}).get("not_estimable") or "no length-standardised gap"
        return {"verdict": None, "not_estimable": why, "gap": _figure(gate)}
    verdict = verdict_of(
        gate, f["effect"], f["check"], rules.delta, f["both"], bound=f.get("bound")
    )
    return {"verdict": verdict, "gap": _figure(gate)}


def add_sensitivity(
    hypotheses: dict[str, Any],
    frame: pd.DataFrame,
    rs: Resampler,
    rules: Rules,
    support: Support,
    parts: Parts,
) -> None:
    """Add ``sensitivity`` to each decided hypothesis of ``hypotheses`` (in place)."""
    ks = per_k(frame, rs, rules, support)
    for name, h in hypotheses.items():
        f = figures(parts, name)
        if h.get("verdict") == INSUFFICIENT or f["effect"] is None:
            h["sensitivity"] = {"not_computed": "no verdict to test (too little data)"}
            continue
        h["sensitivity"] = {
            "flip": flips(f, rules.delta),
            "all_tokens": {
                "verdict": verdict_of(
                    f["gate_all"],
                    f["effect"],
                    f["check"],
                    rules.delta,
                    f["both"],
                    bound=f.get("bound"),
                ),
                "gap": _figure(f["gate_all"]),
            },
            "length_standardised": _length(f, rules),
            "per_k": {k: entry[name] | {"runs": entry["runs"]} for k, entry in ks.items()},
            "previous_rule": {
                "verdict": verdict_of(
                    f["gate"],
                    f["effect"],
                    f["check"],
                    rules.delta,
                    f["both"],
                    REPORTED_KEYS,
                    f.get("bound"),
                ),
                "level": 0.95,
                "note": RULE_CHANGE,
            },
        }
