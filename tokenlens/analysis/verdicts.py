"""H1 / H2 verdicts from the numbers, by the rules in docs/analysis.md.

Vocabulary: ``supported``, ``not_supported``, ``no_japanese_deficit`` (Japanese is not
worse by more than δ: no deficit beyond the margin to explain), ``inconclusive``,
``insufficient_data`` (fewer than ``min_prompts`` prompts per language).

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
(:func:`combine`):

- ``supported``: effect yes and check not no;
- ``not_supported``: effect no and check not yes;
- ``inconclusive``: anything else (an unsure effect, or effect and check disagreeing).

H2's rule is the conjunction (:func:`conjoin`): ``supported`` only when both say yes,
because its effect also moves when only the n-gram drafter changes (measured in
benchmarks/bench_verdicts.py).

H1 (tokenization / text structure): the effect is the *shared composition* of the
judged gap by the target's confidence for the trained drafters (Japanese has more of
the positions where the target itself is unsure, and such positions are hard for every
drafter); the check is the same quantity for the training-free (n-gram) drafter on the
same prompts. Computed per drafter family, never pooling the two.

H2 (training data): the effect is the difference in differences of the within-confidence
Japanese gap, trained minus training-free drafters on the same prompts; the check is
the trained drafters' own within-confidence gap (with the same weights), so that
"n-gram is better on Japanese" alone never reads as "the trained drafter lacks data".
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from tokenlens.analysis.bootstrap import DECISION_LEVEL, Resampler, prompt_keys
from tokenlens.analysis.breakdown import per_lang, row_mask
from tokenlens.analysis.decompose import (
    CONF_BINS,
    EN,
    JA,
    Support,
    confidence_bins,
    decompose,
    did,
    has_pair,
)
from tokenlens.analysis.gap import gap
from tokenlens.analysis.wording import no_deficit_sentence, reading_sentence, runs_phrase
from tokenlens.arrays import Mask
from tokenlens.engine.config import TRAINING_FREE
from tokenlens.format import interval_prose

SUPPORTED, NOT_SUPPORTED = "supported", "not_supported"
NO_DEFICIT, INCONCLUSIVE, INSUFFICIENT = "no_japanese_deficit", "inconclusive", "insufficient_data"
VERDICTS = (SUPPORTED, NOT_SUPPORTED, NO_DEFICIT, INCONCLUSIVE, INSUFFICIENT)
YES, NO, UNSURE, NA = "yes", "no", "unsure", "n/a"
TRAINED, FREE = "trained", "training_free"
POWER = 0.80

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
    "a violation of a few points moves the difference by as much (docs/bench_verdicts.md). "
    "A within-confidence deficit of the trained drafter alone reads as H2 whether it comes "
    "from its training data or from how it handles the tokenizer."
)


@dataclass(frozen=True)
class Rules:
    """Thresholds of the verdict rules (recorded in summary.json)."""

    delta: float = 0.02
    min_prompts: int = 30
    power_effects: tuple[float, ...] = (0.05, 0.10)
    alpha: float = (1.0 - DECISION_LEVEL) / 2.0

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


def verdict_of(
    gate: Mapping[str, Any] | None,
    effect: Mapping[str, Any] | None,
    check: Mapping[str, Any] | None,
    delta: float,
    both: bool,
    keys: tuple[str, str] = DECISION_KEYS,
) -> str:
    """A verdict from its three figures alone: the no-deficit gate (the family's gap),
    then the effect and the check by the veto rule (``both``: the conjunction rule).
    The same rules as :func:`decide` (the minimum-prompts gate aside), so that a verdict
    can be recomputed at another δ, on another gap or on the reported interval."""
    if read(gate, delta, keys) == NO:
        return NO_DEFICIT
    reading = read(effect, delta, keys)
    check_reading = read(check, delta, keys) if check is not None else None
    return conjoin(reading, check_reading or NA) if both else combine(reading, check_reading)


def code_text(source: str) -> str:
    """The structure of ``source`` without its docstrings (``ast.dump``): what a hash of
    code should see, so that rewording a docstring changes no identity."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body[0] = ast.Pass()
    return ast.dump(tree)


def rules_identity(rules: Rules, support: Support) -> str:
    """A hash of the frozen rule set: δ, α, the minimum prompts, the support thresholds,
    the confidence bins and the code of the rules themselves (comments and docstrings
    aside). Recorded in the analysis signature (``rules:``): two analyses with the same
    hash read their figures by the same rules."""
    code = [code_text(inspect.getsource(fn)) for fn in (tri, combine, conjoin, verdict_of, _rule)]
    text = json.dumps(
        {
            "rules": rules.to_json(),
            "support": support.to_json(),
            "confidence_bins": CONF_BINS,
            "code": code,
        },
        sort_keys=True,
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def pp(effect: dict[str, Any] | None) -> str:
    """``-6.2 pp (95% CI -7.9 to -4.6)``; ``not estimable (why)`` for a null."""
    return interval_prose(effect, "pp") if effect is not None else "not available"


def families(frame: pd.DataFrame) -> dict[str, Mask]:
    """Row masks of the trained and training-free drafter families present."""
    method = frame["method"].astype(str).to_numpy()
    free = np.isin(method, list(TRAINING_FREE))
    out = {}
    if (~free).any():
        out[TRAINED] = ~free
    if free.any():
        out[FREE] = free
    return out


def configurations(frame: pd.DataFrame, rows: Mask) -> list[list[Any]]:
    """The distinct (method, k) run configurations among ``rows``, sorted."""
    method = frame["method"].astype(str).to_numpy()[rows]
    k = frame["k"].to_numpy()[rows] if "k" in frame else np.zeros(int(rows.sum()), np.int64)
    pairs = {(str(m), int(x)) for m, x in zip(method, k, strict=True)}
    return [[m, x] for m, x in sorted(pairs)]


def scope_phrase(block: Mapping[str, Any] | None) -> str:
    """``judged positions, runs of draft_model at k = 1–5``: the rows and runs a
    family's figures read."""
    configs = (block or {}).get("configurations") or []
    return "judged positions, " + runs_phrase((str(m), int(k)) for m, k in configs)


def prompts_per_lang(frame: pd.DataFrame, rows: Mask | None = None) -> dict[str, int]:
    """Distinct prompts per language (among ``rows``): the units of evidence."""
    lang = frame["lang"].astype(str).to_numpy()
    keys = prompt_keys(frame)
    if rows is not None:
        lang, keys = lang[rows], keys[rows]
    return {x: len(set(keys[lang == x])) for x in (JA, EN)}


def _power(effect: dict[str, Any] | None, df: int, rules: Rules, n_prompts: int) -> dict[str, Any]:
    """Minimum detectable effect now, and prompts per language a given effect needs.

    SE comes back from the reported 95% interval (half-width / t quantile). To be
    ``supported`` an effect's decision interval must clear −δ, a one-sided test at α, so
    with power 80% the smallest detectable effect is δ + (t_(1−α) + t_0.80) · SE; prompts
    needed scale SE by sqrt(N / N').
    """
    out: dict[str, Any] = {"power": POWER, "prompts_per_language": n_prompts}
    if effect is None or effect.get("ci_low") is None or df < 1:
        out.update(se=None, mde=None, prompts_needed=None, not_estimable="no interval")
        return out
    half = (float(effect["ci_high"]) - float(effect["ci_low"])) / 2.0
    se = half / float(stats.t.ppf(0.975, df))
    one_sided = 1.0 - rules.alpha
    mde = rules.delta + (float(stats.t.ppf(one_sided, df)) + float(stats.t.ppf(POWER, df))) * se
    z = float(stats.norm.ppf(one_sided) + stats.norm.ppf(POWER))
    needed = {}
    for size in rules.power_effects:
        need = n_prompts * (z * se / (size - rules.delta)) ** 2 if size > rules.delta else math.inf
        needed[f"{size:g}"] = (
            max(rules.min_prompts, math.ceil(need)) if math.isfinite(need) else None
        )
    out.update(se=se, mde=mde, prompts_needed=needed)
    return out


def _se(figure: Mapping[str, Any] | None, df: int) -> float | None:
    """The SE behind a figure's reported 95% t interval (half-width / t quantile)."""
    if figure is None or figure.get("ci_low") is None or figure.get("ci_high") is None:
        return None
    half = (float(figure["ci_high"]) - float(figure["ci_low"])) / 2.0
    return half / float(stats.t.ppf(0.975, df)) if df >= 1 and half > 0 else None


def bivariate_normal_cdf(h: float, k: float, rho: float) -> float:
    """P(X < h, Y < k) for standard normals with correlation ``rho`` (|rho| < 1), by
    Owen's T function (Owen 1956): exact and fast, unlike a numerical integration."""
    from scipy.special import owens_t

    rho = float(np.clip(rho, -0.999999, 0.999999))
    s = math.sqrt(1.0 - rho * rho)
    phi_h, phi_k = float(stats.norm.cdf(h)), float(stats.norm.cdf(k))
    if h == 0.0 and k == 0.0:
        return 0.25 + math.asin(rho) / (2.0 * math.pi)
    if h == 0.0:
        h = 1e-300 if k > 0 else -1e-300
    if k == 0.0:
        k = 1e-300 if h > 0 else -1e-300
    t1 = float(owens_t(h, (k - rho * h) / (h * s)))
    t2 = float(owens_t(k, (h - rho * k) / (k * s)))
    beta = 0.0 if h * k > 0 or (h * k == 0 and h + k >= 0) else 0.5
    return float(np.clip(0.5 * (phi_h + phi_k) - t1 - t2 - beta, 0.0, 1.0))


def _both_yes(effect: float, se: tuple[float, float], rho: float, q: float, delta: float) -> float:
    """P(both decision intervals lie below −δ) when both figures equal ``effect``: each
    reads yes when estimate + q·SE < −δ; the estimates are bivariate normal with
    correlation ``rho``."""
    a = (-delta - effect) / se[0] - q
    b = (-delta - effect) / se[1] - q
    return bivariate_normal_cdf(a, b, rho)


def power_conjunction(
    effect: Mapping[str, Any] | None,
    check: Mapping[str, Any] | None,
    rho: float | None,
    df: int,
    rules: Rules,
    n_prompts: int,
) -> dict[str, Any]:
    """H2's power under its whole rule: ``supported`` needs the effect (the difference in
    differences) *and* the check (the trained drafters' within-confidence gap) to read
    yes. For an H2 effect of size e with parallel trends holding (the n-gram drafter's
    within-confidence gap 0), both figures have mean e; their SEs come from their
    reported intervals and their correlation from the shared bootstrap replicates.
    ``mde``: the smallest |e| found 80% of the time; ``power_at``: the power at each
    ``power_effects`` size; ``prompts_needed``: prompts per language for 80% at each size
    (SEs scaled by sqrt(N / N')); ``mde_effect_alone``: the same from the effect alone,
    what the first version reported. The no-deficit gate is not modelled: under an
    effect beyond δ the gap rarely clears −δ."""
    alone = _power(dict(effect) if effect is not None else None, df, rules, n_prompts)
    out: dict[str, Any] = {
        "power": POWER,
        "prompts_per_language": n_prompts,
        "rule": "conjunction: the effect and the check must both read yes",
        "se": alone.get("se"),
        "mde_effect_alone": alone.get("mde"),
    }
    se_d, se_w = _se(effect, df), _se(check, df)
    if se_d is None or se_w is None or rho is None or not math.isfinite(rho):
        out.update(mde=None, prompts_needed=None, power_at=None, not_estimable="no interval")
        return out
    q = float(stats.t.ppf(1.0 - rules.alpha, df))

    def power_at(e: float, scale: float = 1.0, quantile: float = q) -> float:
        return _both_yes(e, (se_d * scale, se_w * scale), rho, quantile, rules.delta)

    def smallest(scale: float = 1.0, quantile: float = q) -> float:
        lo, hi = rules.delta, rules.delta + 40.0 * max(se_d, se_w) * scale
        for _ in range(60):
            mid = (lo + hi) / 2.0
            if power_at(-mid, scale, quantile) >= POWER:
                hi = mid
            else:
                lo = mid
        return hi

    z = float(stats.norm.ppf(1.0 - rules.alpha))
    needed: dict[str, int | None] = {}
    for size in rules.power_effects:
        if size <= rules.delta:
            needed[f"{size:g}"] = None
            continue
        lo_n, hi_n = 1.0, 1e7
        if power_at(-size, math.sqrt(n_prompts / hi_n), z) < POWER:
            needed[f"{size:g}"] = None
            continue
        for _ in range(80):
            mid = math.sqrt(lo_n * hi_n)
            if power_at(-size, math.sqrt(n_prompts / mid), z) >= POWER:
                hi_n = mid
            else:
                lo_n = mid
        needed[f"{size:g}"] = max(rules.min_prompts, math.ceil(hi_n))
    out.update(
        se_check=se_w,
        correlation=rho,
        mde=smallest(),
        power_at={f"{size:g}": power_at(-size) for size in rules.power_effects},
        prompts_needed=needed,
    )
    return out


def _verdict(
    verdict: str,
    effect: dict[str, Any] | None,
    evidence: str,
    **extra: Any,
) -> dict[str, Any]:
    effect = effect or {"value": None, "ci_low": None, "ci_high": None}
    out = {
        "verdict": verdict,
        "effect": effect.get("value"),
        "ci_low": effect.get("ci_low"),
        "ci_high": effect.get("ci_high"),
    }
    if effect.get("decision_low") is not None and effect.get("decision_high") is not None:
        out["decision_low"] = effect["decision_low"]
        out["decision_high"] = effect["decision_high"]
    reason = effect.get("not_estimable") or effect.get("no_interval")
    if effect.get("value") is None or effect.get("ci_low") is None:
        out["not_estimable"] = reason or "not computed"
    out["evidence"] = evidence
    out.update(extra)
    return out


@dataclass(frozen=True)
class Parts:
    """Everything the verdicts read, computed once (also written to summary.json)."""

    families: dict[str, dict[str, Any]]
    contrast: dict[str, Any] | None
    prompts: dict[str, int]
    conf_rows: int
    df: int


def compute_parts(frame: pd.DataFrame, rs: Resampler, support: Support) -> Parts:
    """Per family: judged gap and three-way split by confidence; the H2 contrast."""
    judged = row_mask(frame, "judged")
    fams = families(frame)
    top1 = frame["top1_prob"].to_numpy(dtype=np.float64) if "top1_prob" in frame else None
    conf_rows = judged & np.isfinite(top1) if top1 is not None else np.zeros(len(frame), bool)
    codes, labels = confidence_bins(frame, conf_rows)
    out: dict[str, dict[str, Any]] = {}
    for name, mask in fams.items():
        rows = judged & mask
        block: dict[str, Any] = {
            "methods": sorted(set(frame["method"].astype(str).to_numpy()[mask])),
            "runs": sorted(set(frame["run"].astype(str).to_numpy()[mask])),
            "configurations": configurations(frame, mask),
            # vLLM's rate over every run of the family: pooled over k when the family
            # has several (``configurations``); read per run (``runs[]``) then.
            "acceptance": per_lang(frame, rs, mask, 0),
            "acceptance_judged": per_lang(frame, rs, rows, 0),
            "prompts": prompts_per_lang(frame, mask),
        }
        if has_pair(frame, rows):
            block["gap_judged"] = gap(frame, rs, rows)
            block["gap_all"] = gap(frame, rs, mask)
            dec = decompose(frame, rs, codes, labels, conf_rows & mask, support, "confidence")
            block["confidence"] = dec
        out[name] = block
    contrast = None
    if TRAINED in fams and FREE in fams and has_pair(frame, judged):
        contrast = did(frame, rs, codes, labels, conf_rows, fams[TRAINED], support)
        contrast["bins"] = labels
    g, h = rs.design(judged)
    return Parts(out, contrast, prompts_per_lang(frame), int(conf_rows.sum()), max(g - h, 0))


def decide(frame: pd.DataFrame, rs: Resampler, rules: Rules, parts: Parts) -> dict[str, Any]:
    """``{"H1": {...}, "H2": {...}}``: verdict, effect, ci_low, ci_high, evidence, ..."""
    if not has_pair(frame):
        # A missing language is the limiting case of too few prompts: insufficient data
        # (what --help and the contract promise), not an inconclusive reading of data.
        found = prompts_per_lang(frame)
        msg = (
            f"Too little data for a verdict: {found.get(JA, 0)} Japanese and "
            f"{found.get(EN, 0)} English prompts; the verdicts need both languages"
        )
        return {h: _verdict(INSUFFICIENT, None, msg) for h in ("H1", "H2")}
    out = {}
    for name, decide_one, fams in (
        ("H1", _h1, (TRAINED if TRAINED in parts.families else FREE, FREE)),
        ("H2", _h2, (TRAINED, FREE)),
    ):
        # The prompts behind this hypothesis: every family it reads, both languages.
        counts = [
            (parts.families[f].get("prompts") or {})
            for f in dict.fromkeys(fams)
            if f in parts.families
        ] or [parts.prompts]
        ja = min(c.get(JA, 0) for c in counts)
        en = min(c.get(EN, 0) for c in counts)
        h = decide_one(parts, rules, min(ja, en))
        if min(ja, en) < rules.min_prompts:
            h["verdict"] = INSUFFICIENT
            h["evidence"] = (
                f"Too little data for a verdict: {ja} Japanese and {en} English prompts; the "
                f"rules need at least {rules.min_prompts} per language. {h['evidence']}"
            )
        out[name] = h
    return out


def _rule(
    gap_j: dict[str, Any] | None,
    reading: str,
    check: str | None,
    rules: Rules,
    both: bool = False,
    scope: str = "judged positions",
) -> tuple[str, str]:
    """(verdict, sentence to add): no deficit first, then the symmetric veto rule
    (``both``: the conjunction rule)."""
    if tri(gap_j, rules.delta) == NO:  # the judged gap's interval lies above −δ
        assert gap_j is not None
        bounds = dict(zip(DECISION_KEYS, decision_bounds(gap_j), strict=True))
        return NO_DEFICIT, (
            f" The judged gap is {pp(gap_j)}. "
            + no_deficit_sentence(rules.delta, scope, bounds, rules.decision_level)
            + "."
        )
    verdict = conjoin(reading, check or NA) if both else combine(reading, check)
    if verdict == INCONCLUSIVE and reading in (YES, NO):
        if both and reading == YES and check != NO:
            return verdict, " The check is not decided: H2 needs both."
        return verdict, " The check disagrees with the effect."
    return verdict, ""


def _h1(parts: Parts, rules: Rules, n: int) -> dict[str, Any]:
    fam = TRAINED if TRAINED in parts.families else FREE
    block = parts.families.get(fam) or {}
    dec = block.get("confidence")
    if parts.conf_rows == 0:
        return _verdict(
            INCONCLUSIVE,
            None,
            "The runs carry no target logprobs: the composition by the target's confidence "
            "cannot be measured (trace with --logprobs).",
            reading=NA,
        )
    if dec is None:
        return _verdict(INCONCLUSIVE, None, "No judged Japanese and English rows to split.")
    effect = dec["composition"]
    reading = tri(effect, rules.delta)
    check = None
    check_reading = None
    other = (parts.families.get(FREE) or {}).get("confidence") if fam == TRAINED else None
    if other is not None:
        check = other["composition"]
        check_reading = tri(check, rules.delta)
    gap_j = block.get("gap_judged")
    label = "trained drafters" if fam == TRAINED else "training-free drafters"
    text = (
        f"Judged-acceptance gap of the {label} (Japanese minus English): {pp(gap_j)}. "
        f"Split by the target's confidence: shared composition {pp(effect)}, within "
        f"{pp(dec['within'])}, out of support {pp(dec['out_of_support'])} "
        f"({1 - dec['support']['share_ja']:.0%} of Japanese and "
        f"{1 - dec['support']['share_en']:.0%} of English rows lie outside the shared bins)."
    )
    if check is not None:
        text += f" Check, the n-gram drafter's shared composition: {pp(check)}."
    elif fam == TRAINED:
        text += " No training-free (n-gram) run on the same prompts: the check is missing."
    scope = scope_phrase(block)
    verdict, note = _rule(gap_j, reading, check_reading, rules, scope=scope)
    text += note
    check_scope = scope_phrase(parts.families.get(FREE))
    statement = _statement(
        verdict,
        gap_j,
        rules,
        scope,
        [
            ("shared composition by the target's confidence", effect, reading, scope),
            ("check, the n-gram drafter's shared composition", check, check_reading, check_scope),
        ],
    )
    return _verdict(
        verdict,
        effect,
        text,
        family=fam,
        estimand="shared composition of the judged gap by the target's confidence",
        reading=reading,
        check=_check(check, check_reading, "shared composition, training-free drafters"),
        power={
            **_power(effect, parts.df, rules, n),
            "rule": "effect alone: the check's veto, which binds only when the check reads "
            "no, is not modelled",
        },
        caveat=CONFIDENCE_CAVEAT + " " + TOKEN_CAVEAT,
        scope=scope,
        statement=statement,
    )


def _h2(parts: Parts, rules: Rules, n: int) -> dict[str, Any]:
    if TRAINED not in parts.families:
        return _verdict(
            INCONCLUSIVE, None, "No trained-drafter run: H2 concerns learned drafters.", reading=NA
        )
    if parts.conf_rows == 0:
        return _verdict(
            INCONCLUSIVE,
            None,
            "The runs carry no target logprobs: 'at equal target confidence' cannot be "
            "measured (trace with --logprobs).",
            reading=NA,
        )
    if parts.contrast is None:
        return _verdict(
            INCONCLUSIVE,
            None,
            "H2 is a contrast against the training-free (n-gram) drafter on the same prompts; "
            "no n-gram run was given.",
            reading=NA,
        )
    effect = parts.contrast["difference"]
    check = parts.contrast["within_trained"]
    reading, check_reading = tri(effect, rules.delta), tri(check, rules.delta)
    gap_j = (parts.families.get(TRAINED) or {}).get("gap_judged")
    text = (
        f"At equal target confidence, the trained drafters' Japanese gap is {pp(check)} and "
        f"the n-gram drafter's {pp(parts.contrast['within_training_free'])}; difference "
        f"{pp(effect)}."
    )
    trained = parts.families.get(TRAINED)
    scope = scope_phrase(trained)
    verdict, note = _rule(gap_j, reading, check_reading, rules, both=True, scope=scope)
    text += note
    both_configs = [
        *((trained or {}).get("configurations") or []),
        *((parts.families.get(FREE) or {}).get("configurations") or []),
    ]
    contrast_scope = "judged positions, " + runs_phrase((str(m), int(k)) for m, k in both_configs)
    statement = _statement(
        verdict,
        gap_j,
        rules,
        scope,
        [
            (
                "difference in differences, trained minus n-gram within-confidence gap",
                effect,
                reading,
                contrast_scope,
            ),
            ("check, the trained drafters' within-confidence gap", check, check_reading, scope),
        ],
    )
    correlation = (parts.contrast.get("correlation") or {}).get("difference_within_trained")
    return _verdict(
        verdict,
        effect,
        text,
        family=TRAINED,
        estimand="difference in differences of the within-confidence Japanese gap, "
        "trained minus training-free drafters",
        reading=reading,
        check=_check(check, check_reading, "within-confidence gap, trained drafters"),
        power=power_conjunction(effect, check, correlation, parts.df, rules, n),
        caveat=H2_CAVEAT + " " + CONFIDENCE_CAVEAT,
        scope=scope,
        statement=statement,
    )


def _statement(
    verdict: str,
    gate: dict[str, Any] | None,
    rules: Rules,
    scope: str,
    readings: list[tuple[str, dict[str, Any] | None, str | None, str]],
) -> str:
    """The verdict worded against its margin (:mod:`tokenlens.analysis.wording`): the
    gate's sentence for no deficit, else each reading with its rows, runs and interval."""
    level = rules.decision_level
    if verdict == NO_DEFICIT and gate is not None:
        bounds = dict(zip(DECISION_KEYS, decision_bounds(gate), strict=True))
        return no_deficit_sentence(rules.delta, scope, bounds, level) + "."
    sentences = []
    for label, figure, reading, where in readings:
        if figure is None or reading is None:
            continue
        low, high = decision_bounds(figure)
        sentences.append(
            f"{label[0].upper()}{label[1:]}: "
            + reading_sentence(reading, rules.delta, where, low, high, level)
            + "."
        )
    return " ".join(sentences)


def _check(effect: dict[str, Any] | None, reading: str | None, name: str) -> dict[str, Any] | None:
    if effect is None:
        return None
    return {"name": name, **effect, "reading": reading or NA}
