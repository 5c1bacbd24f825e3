"""How much data a verdict needs: the power of the verdict rules at the variability a
study measured (docs/analysis.md, "Power").

H1 reads one effect, so its power is that of one one-sided test against δ
(:func:`effect_power`); H2 is a conjunction of two correlated readings, whose power
comes from the bivariate normal (:func:`power_conjunction`). Both report the minimum
detectable effect now and the prompts per language each effect size would need.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy import stats

from tokenlens.analysis.rules import POWER, Rules


def effect_power(
    effect: dict[str, Any] | None, df: int, rules: Rules, n_prompts: int
) -> dict[str, Any]:
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
    alone = effect_power(dict(effect) if effect is not None else None, df, rules, n_prompts)
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
