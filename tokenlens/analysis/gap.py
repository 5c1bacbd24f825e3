"""The Japanese − English acceptance gap, and an exploratory logistic model of it.

The gap's three-way split and the drafter contrast are in
:mod:`tokenlens.analysis.decompose`; per-class gaps with multiplicity-adjusted
intervals in :mod:`tokenlens.analysis.explore`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler, prompt_keys
from tokenlens.analysis.decompose import EN, JA, has_pair, lang_code
from tokenlens.arrays import Mask

__all__ = ["EN", "JA", "gap", "has_pair", "regression"]

REGRESSION_MAX_ROWS = 400_000


def gap(frame: pd.DataFrame, rs: Resampler, rows: Mask, relative: bool = False) -> dict[str, Any]:
    """r_ja − r_en (or r_ja / r_en − 1 with ``relative``) over ``rows``, with its interval."""
    code = lang_code(frame)
    keep = rows & (code >= 0)
    acc = frame["accepted"].to_numpy(dtype=np.float64)
    num, den, _ = rs.counted(acc, code, 2, keep)
    with np.errstate(divide="ignore", invalid="ignore"):
        r_point, r_boot = num.point / den.point, num.boot / den.boot
        if relative:
            point = r_point[0] / r_point[1] - 1.0
            boot = r_boot[:, 0] / r_boot[:, 1] - 1.0
        else:
            point = r_point[0] - r_point[1]
            boot = r_boot[:, 0] - r_boot[:, 1]
    g, h = rs.design(keep)
    return rs.effect(float(point), boot, g, h, int(den.point.sum()))


def regression(
    frame: pd.DataFrame, column: str, rows: Mask, min_count: int, seed: int
) -> dict[str, Any]:
    """Logistic regression of acceptance on lang x class + position (+ confidence).

    Judged Japanese and English rows; classes with fewer than ``min_count`` rows are
    pooled into ``other``; lang x class terms only for classes both languages have.
    Standard errors are clustered by prompt (the same prompt in several runs is one
    cluster). Above :data:`REGRESSION_MAX_ROWS` rows
    the fit uses a seeded sample of whole requests (the clustering stays valid).
    """
    import statsmodels.api as sm

    code = lang_code(frame)
    keep = rows & (code >= 0)
    use_conf = "top1_prob" in frame and bool(np.isfinite(frame["top1_prob"].to_numpy()[keep]).all())
    cluster = pd.factorize(prompt_keys(frame)[keep])[0]
    judged = np.flatnonzero(keep)
    if len(judged) > REGRESSION_MAX_ROWS:
        # the sample first, then a copy of its rows only (not of every judged row)
        clusters = np.unique(cluster)
        frac = REGRESSION_MAX_ROWS / len(judged)
        rng = np.random.default_rng(seed)
        chosen = rng.choice(clusters, size=max(2, int(len(clusters) * frac)), replace=False)
        sampled = np.isin(cluster, chosen)
        judged, cluster = judged[sampled], cluster[sampled]
    sub = frame.iloc[judged][[column, "position", "accepted", "run", "request_id"]].copy()
    if use_conf:
        sub["conf"] = frame["top1_prob"].to_numpy()[judged]
    sub["ja"] = (code[judged] == 0).astype(np.float64)
    sub["cluster"] = cluster
    if len(sub) < 2 * min_count or sub["ja"].nunique() < 2:
        return {"error": "too few judged Japanese and English rows"}
    cls = sub[column].astype(str)
    counts = cls.value_counts()
    cls = cls.where(cls.map(counts) >= min_count, "other")
    ref = cls[sub["ja"] == 0].value_counts().idxmax() if (sub["ja"] == 0).any() else cls.iloc[0]
    dummies = pd.get_dummies(cls, prefix=column, dtype=np.float64).drop(columns=f"{column}_{ref}")
    by_lang = pd.crosstab(cls, sub["ja"])
    shared = [c for c in by_lang.index if c != ref and (by_lang.loc[c] >= min_count).all()]
    inter = {f"ja:{column}_{c}": sub["ja"] * (cls == c) for c in shared}
    pos = pd.get_dummies(sub["position"].astype(int), prefix="position", dtype=np.float64)
    pos = pos.drop(columns=pos.columns[0])
    parts = [sub[["ja"]], dummies, pd.DataFrame(inter, index=sub.index), pos]
    if use_conf:
        parts.append(sub[["conf"]])
    x = sm.add_constant(pd.concat(parts, axis=1).astype(np.float64), has_constant="add")
    x = x[[c for c in x.columns if c == "const" or x[c].std() > 0]]
    try:
        with warnings.catch_warnings():  # non-convergence is reported in the output instead
            warnings.simplefilter("ignore")
            fit = sm.Logit(sub["accepted"].astype(np.float64), x).fit(
                disp=0, cov_type="cluster", cov_kwds={"groups": sub["cluster"].to_numpy()}
            )
    except Exception as exc:  # statsmodels raises several types on separation/singularity
        return {"error": " ".join(f"{type(exc).__name__}: {exc}".split())}
    conf_int = fit.conf_int()
    terms = {
        name: {
            "coef": float(fit.params[name]),
            "se": float(fit.bse[name]),
            "p": float(fit.pvalues[name]),
            "ci_low": float(conf_int.loc[name, 0]),
            "ci_high": float(conf_int.loc[name, 1]),
            "odds_ratio": float(np.exp(fit.params[name])),
        }
        for name in fit.params.index
    }
    return {
        "formula": f"accepted ~ ja * C({column}) + C(position)"
        + (" + top1_prob" if use_conf else ""),
        "reference_class": ref,
        "rows": len(sub),
        "requests": int(sub["cluster"].nunique()),
        "sampled": bool(len(sub) < int(keep.sum())),
        "converged": bool(fit.mle_retvals.get("converged", False)),
        "terms": terms,
    }
