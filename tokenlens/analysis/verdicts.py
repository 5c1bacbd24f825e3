"""H1 / H2 verdicts from the numbers, by the rules in docs/analysis.md.

Each rule reads one effect with its 95% interval against a practical threshold
``delta`` (default 2 acceptance points): *yes* when the whole interval lies below
-delta (Japanese clearly worse by more than delta), *no* when it lies above -delta
(any Japanese deficit is smaller than delta), otherwise *unsure*.

- H1 (tokenization / text structure) reads the *composition* part of the gap by the
  target's confidence (Japanese has more positions where the target itself is unsure;
  by script class when the runs have no logprobs), and, when a training-free
  (n-gram) run is given, that run's gap: the signature must show for any drafter.
- H2 (training data) reads the *within* part of the gap at equal target confidence,
  over trained-drafter runs ("confident misses"), and, with an n-gram run, whether
  trained drafters lose relatively more on Japanese than n-gram does.

A verdict is ``inconclusive`` when the data are too few (fewer than ``min_requests``
requests per language), when an effect's interval straddles the threshold, or when
the two signals contradict each other. Every verdict carries a sentence built from
the numbers it used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler
from tokenlens.analysis.breakdown import row_mask
from tokenlens.analysis.gap import EN, JA, decompose, gap, has_pair, method_contrast
from tokenlens.analysis.join import TRAINING_FREE

SUPPORTED, NOT_SUPPORTED, INCONCLUSIVE = "supported", "not_supported", "inconclusive"


@dataclass(frozen=True)
class Rules:
    """Thresholds of the verdict rules (recorded in summary.json)."""

    delta: float = 0.02
    delta_relative: float = 0.05
    min_requests: int = 5
    min_count: int = 30


def tri(effect: dict[str, Any] | None, delta: float) -> str:
    """``yes`` / ``no`` / ``unsure`` for "Japanese is worse by more than delta"."""
    if effect is None or effect["ci_low"] is None or effect["ci_high"] is None:
        return "unsure"
    if effect["ci_high"] < -delta:
        return "yes"
    if effect["ci_low"] > -delta:
        return "no"
    return "unsure"


def pp(effect: dict[str, Any] | None) -> str:
    """``-6.2 pp (95% CI -7.9 to -4.6)``."""
    if effect is None or effect["value"] is None:
        return "n/a"
    lo, hi = effect["ci_low"], effect["ci_high"]
    ci = (
        f" (95% CI {100 * lo:+.1f} to {100 * hi:+.1f})" if lo is not None and hi is not None else ""
    )
    return f"{100 * effect['value']:+.1f} pp{ci}"


def pct(effect: dict[str, Any] | None) -> str:
    """Relative effect: ``-12% (95% CI -18% to -6%)``."""
    if effect is None or effect["value"] is None:
        return "n/a"
    lo, hi = effect["ci_low"], effect["ci_high"]
    ci = (
        f" (95% CI {100 * lo:+.0f}% to {100 * hi:+.0f}%)"
        if lo is not None and hi is not None
        else ""
    )
    return f"{100 * effect['value']:+.0f}%{ci}"


def _verdict(
    verdict: str, effect: dict[str, Any] | None, evidence: str, **extra: Any
) -> dict[str, Any]:
    effect = effect or {"value": None, "ci_low": None, "ci_high": None}
    return {
        "verdict": verdict,
        "effect": effect["value"],
        "ci_low": effect["ci_low"],
        "ci_high": effect["ci_high"],
        "evidence": evidence,
        **extra,
    }


def decide(frame: pd.DataFrame, rs: Resampler, rules: Rules) -> dict[str, dict[str, Any]]:
    """``{"H1": {...}, "H2": {...}}`` with verdict, effect, ci_low, ci_high, evidence."""
    if not has_pair(frame):
        msg = "needs both Japanese (ja) and English (en) requests"
        return {"H1": _verdict(INCONCLUSIVE, None, msg), "H2": _verdict(INCONCLUSIVE, None, msg)}
    lang = frame["lang"].astype(str).to_numpy()
    request = frame["request_id"].astype(str).to_numpy()
    n_ja = len(np.unique(request[lang == JA]))  # distinct prompts, not (run, prompt)
    n_en = len(np.unique(request[lang == EN]))
    if min(n_ja, n_en) < rules.min_requests:
        msg = (
            f"too little data: {n_ja} Japanese and {n_en} English requests "
            f"(the rules need at least {rules.min_requests} of each)"
        )
        return {"H1": _verdict(INCONCLUSIVE, None, msg), "H2": _verdict(INCONCLUSIVE, None, msg)}
    judged = row_mask(frame, "judged")
    conf = frame["top1_prob"].to_numpy() if "top1_prob" in frame else np.full(len(frame), np.nan)
    has_conf = judged & np.isfinite(conf)
    use_conf = bool(has_conf.any())
    method = frame["method"].astype(str).to_numpy()
    free = np.isin(method, list(TRAINING_FREE))
    return {
        "H1": _h1(frame, rs, rules, judged, has_conf if use_conf else None, free),
        "H2": _h2(frame, rs, rules, judged, has_conf if use_conf else None, free),
    }


def _h1(
    frame: pd.DataFrame,
    rs: Resampler,
    rules: Rules,
    judged: np.ndarray[Any, Any],
    conf_rows: np.ndarray[Any, Any] | None,
    free: np.ndarray[Any, Any],
) -> dict[str, Any]:
    if conf_rows is not None:
        dec = decompose(frame, rs, "conf_bucket", conf_rows, rules.min_count)
        basis = "the target's confidence"
    else:
        dec = decompose(frame, rs, "script", judged, rules.min_count)
        basis = "script class (no logprobs in the runs)"
    if dec is None:
        return _verdict(INCONCLUSIVE, None, "no judged Japanese and English rows to decompose")
    comp = dec["composition"]
    c1 = tri(comp, rules.delta)
    ngram = gap(frame, rs, free) if free.any() and has_pair(frame[free]) else None
    c2 = tri(ngram, rules.delta) if ngram is not None else None
    script = decompose(frame, rs, "script", judged, rules.min_count)
    hard = ""
    if script is not None:
        worst = sorted(script["classes"], key=lambda c: c["composition"]["value"] or 0.0)[:3]
        named = [
            f"{c['class']} {100 * c['composition']['value']:+.1f} pp"
            for c in worst
            if c["composition"]["value"] is not None and c["composition"]["value"] < 0
        ]
        if named:
            hard = f" Classes that make Japanese harder by their share: {', '.join(named)}."
    text = (
        f"Composition by {basis} accounts for {pp(comp)} of the {pp(dec['gap'])} judged-"
        f"acceptance gap (Japanese minus English)."
    )
    if ngram is not None:
        text += f" The training-free (n-gram) runs show a {pp(ngram)} gap."
    else:
        text += " No training-free (n-gram) run was given to check the gap for any drafter."
    text += hard
    if c1 == "yes" and c2 in (None, "yes"):
        verdict = SUPPORTED
    elif c1 == "yes":
        verdict = INCONCLUSIVE
        text += (
            " The n-gram runs contradict it."
            if c2 == "no"
            else " The n-gram gap is too uncertain to confirm it."
        )
    elif c1 == "no":
        verdict = NOT_SUPPORTED
    else:
        verdict = INCONCLUSIVE
    return _verdict(verdict, comp, text, basis=basis, ngram_gap=ngram)


def _h2(
    frame: pd.DataFrame,
    rs: Resampler,
    rules: Rules,
    judged: np.ndarray[Any, Any],
    conf_rows: np.ndarray[Any, Any] | None,
    free: np.ndarray[Any, Any],
) -> dict[str, Any]:
    trained = ~free
    if not trained.any() or not has_pair(frame[trained]):
        return _verdict(
            INCONCLUSIVE, None, "no trained-drafter run (only n-gram): H2 concerns learned drafters"
        )
    contrast = method_contrast(frame, rs, judged, trained) if free.any() else None
    diff = contrast["difference"] if contrast is not None else None
    if conf_rows is not None:
        dec = decompose(frame, rs, "conf_bucket", conf_rows & trained, rules.min_count)
        effect = dec["within"] if dec is not None else None
        c1 = tri(effect, rules.delta)
        text = (
            f"At equal target confidence, trained drafters accept Japanese {pp(effect)} "
            f"relative to English (the within-confidence part of the "
            f"{pp(dec['gap'] if dec else None)} gap)."
        )
    elif diff is not None:
        effect, c1 = diff, tri(diff, rules.delta_relative)
        text = "No target logprobs in the runs: judged by the drafter comparison alone."
    else:
        return _verdict(
            INCONCLUSIVE,
            None,
            "needs target logprobs (trace with logprobs) or an n-gram run to compare against",
        )
    c2 = tri(diff, rules.delta_relative) if diff is not None else None
    if diff is not None:
        text += (
            f" Relative Japanese gap: trained {pct(contrast['relative_gap_trained'])}, "  # type: ignore[index]
            f"n-gram {pct(contrast['relative_gap_training_free'])}; "  # type: ignore[index]
            f"difference {pct(diff)}."
        )
    contradicts = (
        c1 == "yes" and diff is not None and diff["ci_low"] is not None and diff["ci_low"] > 0
    ) or (c1 == "no" and c2 == "yes")
    if contradicts:
        verdict = INCONCLUSIVE
        text += " The two signals disagree."
    else:
        verdict = {"yes": SUPPORTED, "no": NOT_SUPPORTED}.get(c1, INCONCLUSIVE)
    return _verdict(verdict, effect, text, method_contrast=contrast)
