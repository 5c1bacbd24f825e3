"""The Japanese - English acceptance gap: overall, per class, decomposed, and modelled.

Decomposition (symmetric Kitagawa / Oaxaca over classes c, judged rows, w = share of a
language's judged rows in c, r = acceptance in c):

    gap = r_ja - r_en = composition + within
    within      = sum over shared c of (w_ja,c + w_en,c)/2 * (r_ja,c - r_en,c)
    composition = gap - within
                = sum over shared c of (w_ja,c - w_en,c) * (r_ja,c + r_en,c)/2
                + sum over unshared c of (w_ja,c r_ja,c - w_en,c r_en,c)

A class is *shared* when both languages have at least ``min_count`` judged rows in
it. A class only one language really has (kanji, hiragana) cannot be "harder in
Japanese than in English", so all of its contribution is composition. The identity is
exact; both parts get intervals from the same request-clustered replicates.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler, as_float, interval, statistic
from tokenlens.analysis.breakdown import Mask, group_codes

F64 = npt.NDArray[np.float64]

JA, EN = "ja", "en"
REGRESSION_MAX_ROWS = 400_000


def has_pair(frame: pd.DataFrame) -> bool:
    """Both Japanese and English rows are present."""
    langs = set(frame["lang"].astype(str).unique())
    return JA in langs and EN in langs


def _pair_codes(frame: pd.DataFrame) -> npt.NDArray[np.int64]:
    """0 for Japanese, 1 for English, -1 otherwise."""
    lang = frame["lang"].astype(str).to_numpy()
    return np.where(lang == JA, 0, np.where(lang == EN, 1, -1)).astype(np.int64)


def _ci(point: F64, lo: F64, hi: F64, i: int, n: int) -> dict[str, Any]:
    return {
        "value": as_float(point[i]),
        "ci_low": as_float(lo[i]),
        "ci_high": as_float(hi[i]),
        "n": int(n),
    }


def gap(frame: pd.DataFrame, rs: Resampler, rows: Mask, relative: bool = False) -> dict[str, Any]:
    """r_ja - r_en (or r_ja / r_en - 1 with ``relative``) over ``rows``, with its interval."""
    code = _pair_codes(frame)
    acc = frame["accepted"].to_numpy(dtype=np.float64)
    num = rs.totals(acc, code, 2, rows)
    den = rs.totals(np.ones(len(frame)), code, 2, rows)

    def fn(a: F64, n: F64) -> F64:
        r = a / n
        out = r[..., 0] / r[..., 1] - 1.0 if relative else r[..., 0] - r[..., 1]
        return np.asarray(out, dtype=np.float64)[..., None]

    point, lo, hi = statistic(fn, num, den)
    return _ci(point, lo, hi, 0, int(den.point.sum()))


def decompose(
    frame: pd.DataFrame, rs: Resampler, column: str, rows: Mask, min_count: int
) -> dict[str, Any] | None:
    """Composition and within-class parts of the judged-rate gap by ``column``.

    None when a language has no rows or the column is entirely missing.
    """
    code = _pair_codes(frame)
    gcode, labels = group_codes(frame, column)
    k = len(labels)
    if k == 0:
        return None
    combo = np.where((code >= 0) & (gcode >= 0), code * k + gcode, -1)
    acc = frame["accepted"].to_numpy(dtype=np.float64)
    num = rs.totals(acc, combo, 2 * k, rows)
    den = rs.totals(np.ones(len(frame)), combo, 2 * k, rows)
    n_ja, n_en = den.point[:k], den.point[k:]
    if n_ja.sum() == 0 or n_en.sum() == 0:
        return None
    shared = (n_ja >= min_count) & (n_en >= min_count)

    def fn(a: F64, n: F64) -> F64:
        a2 = a.reshape(*a.shape[:-1], 2, k)
        n2 = n.reshape(*n.shape[:-1], 2, k)
        tot_a, tot_n = a2.sum(-1), n2.sum(-1)
        r_lang = tot_a / tot_n
        g = r_lang[..., 0] - r_lang[..., 1]
        w = n2 / tot_n[..., None]
        r = np.where(n2 > 0, a2 / np.where(n2 > 0, n2, 1.0), np.nan)
        pool = tot_a.sum(-1) / tot_n.sum(-1)
        mean_w = (w[..., 0, :] + w[..., 1, :]) / 2.0
        within_c = np.where(shared, mean_w * (r[..., 0, :] - r[..., 1, :]), 0.0)
        wr = np.where(n2 > 0, w * np.nan_to_num(r), 0.0)
        dw = w[..., 0, :] - w[..., 1, :]
        comp_c = np.where(
            shared,
            dw * ((r[..., 0, :] + r[..., 1, :]) / 2.0 - pool[..., None]),
            wr[..., 0, :] - wr[..., 1, :] - dw * pool[..., None],
        )
        within = within_c.sum(-1)
        parts = [g[..., None], (g - within)[..., None], within[..., None], comp_c, within_c]
        return np.asarray(np.concatenate(parts, axis=-1), dtype=np.float64)

    point, lo, hi = statistic(fn, num, den)
    n_total = int(den.point.sum())
    classes = []
    for c, label in enumerate(labels):
        if n_ja[c] + n_en[c] == 0:
            continue
        classes.append(
            {
                "class": label,
                "shared": bool(shared[c]),
                "share_ja": float(n_ja[c] / n_ja.sum()),
                "share_en": float(n_en[c] / n_en.sum()),
                "rate_ja": as_float(num.point[c] / n_ja[c]) if n_ja[c] else None,
                "rate_en": as_float(num.point[k + c] / n_en[c]) if n_en[c] else None,
                "composition": _ci(point, lo, hi, 3 + c, int(n_ja[c] + n_en[c])),
                "within": _ci(point, lo, hi, 3 + k + c, int(n_ja[c] + n_en[c])),
            }
        )
    return {
        "column": column,
        "gap": _ci(point, lo, hi, 0, n_total),
        "composition": _ci(point, lo, hi, 1, n_total),
        "within": _ci(point, lo, hi, 2, n_total),
        "unshared_share_ja": float(n_ja[~shared].sum() / n_ja.sum()),
        "unshared_share_en": float(n_en[~shared].sum() / n_en.sum()),
        "classes": classes,
    }


def class_gaps(
    frame: pd.DataFrame, rs: Resampler, column: str, rows: Mask, min_count: int
) -> dict[str, dict[str, Any]]:
    """r_ja,c - r_en,c for every class both languages have ``min_count`` rows of."""
    code = _pair_codes(frame)
    gcode, labels = group_codes(frame, column)
    k = len(labels)
    combo = np.where((code >= 0) & (gcode >= 0), code * k + gcode, -1)
    acc = frame["accepted"].to_numpy(dtype=np.float64)
    num = rs.totals(acc, combo, 2 * k, rows)
    den = rs.totals(np.ones(len(frame)), combo, 2 * k, rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        point, lo, hi = interval(
            num.point[:k] / den.point[:k] - num.point[k:] / den.point[k:],
            num.boot[:, :k] / den.boot[:, :k] - num.boot[:, k:] / den.boot[:, k:],
        )
    out = {}
    for c, label in enumerate(labels):
        if den.point[c] >= min_count and den.point[k + c] >= min_count:
            out[label] = _ci(point, lo, hi, c, int(den.point[c] + den.point[k + c]))
    return out


def regression(
    frame: pd.DataFrame, column: str, rows: Mask, min_count: int, seed: int
) -> dict[str, Any]:
    """Logistic regression of acceptance on lang x class + position (+ confidence).

    Judged Japanese and English rows; classes with fewer than ``min_count`` rows are
    pooled into ``other``; lang x class terms only for classes both languages have.
    Standard errors are clustered by request. Above :data:`REGRESSION_MAX_ROWS` rows
    the fit uses a seeded sample of whole requests (the clustering stays valid).
    """
    import statsmodels.api as sm

    code = _pair_codes(frame)
    keep = rows & (code >= 0)
    use_conf = "top1_prob" in frame and bool(np.isfinite(frame["top1_prob"].to_numpy()[keep]).all())
    sub = frame.loc[keep, [column, "position", "accepted", "run", "request_id"]].copy()
    if use_conf:
        sub["conf"] = frame.loc[keep, "top1_prob"].to_numpy()
    sub["ja"] = (code[keep] == 0).astype(np.float64)
    sub["cluster"] = pd.factorize(sub["run"].astype(str) + "\x00" + sub["request_id"].astype(str))[
        0
    ]
    if len(sub) > REGRESSION_MAX_ROWS:
        clusters = np.unique(sub["cluster"].to_numpy())
        frac = REGRESSION_MAX_ROWS / len(sub)
        rng = np.random.default_rng(seed)
        chosen = rng.choice(clusters, size=max(2, int(len(clusters) * frac)), replace=False)
        sub = sub[sub["cluster"].isin(chosen)]
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


def method_contrast(
    frame: pd.DataFrame, rs: Resampler, rows: Mask, trained: Mask
) -> dict[str, Any] | None:
    """Relative gap of trained drafters minus that of training-free ones (judged rows).

    (r_ja/r_en - 1)[trained] - (r_ja/r_en - 1)[n-gram]: negative when the trained
    drafters lose more on Japanese. Relative, because n-gram and trained drafters
    accept at very different levels and an absolute gap scales with the level.
    None unless both kinds of run have Japanese and English rows.
    """
    code = _pair_codes(frame)
    group = np.where(code >= 0, code + 2 * (~trained).astype(np.int64), -1)
    acc = frame["accepted"].to_numpy(dtype=np.float64)
    num = rs.totals(acc, group, 4, rows)
    den = rs.totals(np.ones(len(frame)), group, 4, rows)
    if (den.point == 0).any():
        return None

    def fn(a: F64, n: F64) -> F64:
        r = a / n
        rel_t = r[..., 0] / r[..., 1] - 1.0
        rel_f = r[..., 2] / r[..., 3] - 1.0
        return np.asarray(np.stack([rel_t - rel_f, rel_t, rel_f], axis=-1), dtype=np.float64)

    point, lo, hi = statistic(fn, num, den)
    n = int(den.point.sum())
    return {
        "difference": _ci(point, lo, hi, 0, n),
        "relative_gap_trained": _ci(point, lo, hi, 1, int(den.point[:2].sum())),
        "relative_gap_training_free": _ci(point, lo, hi, 2, int(den.point[2:].sum())),
    }
