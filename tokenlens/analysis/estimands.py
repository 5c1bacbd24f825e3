"""The key estimands of an analysis by name, for the test bed and the benchmarks.

summary.json nests its figures by purpose (families, contrast, hypotheses); tests and
``benchmarks/bench_verdicts.py`` need them flat and by a stable name, so that the
summary's layout can change without touching the simulations that judge it.
"""

from __future__ import annotations

from typing import Any

from tokenlens.analysis.rules import FREE, TRAINED


def _flat(entry: dict[str, Any] | None, key: str = "value") -> dict[str, Any]:
    if not entry:
        return {
            "value": None,
            "ci_low": None,
            "ci_high": None,
            "not_estimable": "absent",
            "decision_low": None,
            "decision_high": None,
        }
    return {
        "value": entry.get(key),
        "ci_low": entry.get("ci_low"),
        "ci_high": entry.get("ci_high"),
        "not_estimable": entry.get("not_estimable") or entry.get("no_interval"),
        "decision_low": entry.get("decision_low"),
        "decision_high": entry.get("decision_high"),
    }


def key_estimates(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{name: {value, ci_low, ci_high, not_estimable}}`` for every name in :data:`KEYS`.

    ``acceptance_*`` is vLLM's rate (accepted / all draft tokens) of the trained
    drafters' runs when there are any, else of the training-free ones; parts are by
    the target's confidence, on judged rows, per drafter family.
    """
    out: dict[str, dict[str, Any]] = {}
    fams = summary.get("families") or {}
    primary = fams.get(TRAINED) or fams.get(FREE) or {}
    for lang in ("ja", "en"):
        out[f"acceptance_{lang}"] = _flat((primary.get("acceptance") or {}).get(lang), "rate")
    for fam, suffix in ((TRAINED, "trained"), (FREE, "free")):
        block = fams.get(fam) or {}
        out[f"gap_{suffix}"] = _flat(block.get("gap_judged"))
        dec = block.get("confidence") or {}
        for part in ("composition", "within", "out_of_support"):
            out[f"{part}_{suffix}"] = _flat(dec.get(part))
    contrast = summary.get("h2_contrast") or {}
    difference = contrast.get("difference") or {}
    # the estimand as computed, also where the control check refuses to read it ...
    out["h2_did"] = _flat(difference.get("unchecked") or difference)
    # ... and as H2's rule reads it (null outside the control's range)
    out["h2_did_read"] = _flat(difference)
    out["h2_within_trained"] = _flat(contrast.get("within_trained"))
    return out
