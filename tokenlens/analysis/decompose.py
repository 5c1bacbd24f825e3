"""The Japanese − English gap split three ways, and the drafter contrast behind H2.

Over classes c of judged rows (confidence bins, scripts, ...), with n the rows and r the
acceptance of a language in a class, the gap of judged acceptance splits as (Ñopo 2008):

    gap = r_ja − r_en = composition + within + out_of_support

- The *support* S holds the classes that both languages fill (at least ``min_rows``
  judged rows from at least ``min_prompts`` prompts each) with the same kind of token
  (:mod:`tokenlens.analysis.comparable`: ``spans``, ``mixed`` and the like are not). Only there
  can the two languages be compared class by class.
- With v the shares of a language's in-support rows (renormalised within S):
      composition = Σ_S (v_ja,c − v_en,c) · (r_ja,c + r_en,c)/2
      within      = Σ_S (v_ja,c + v_en,c)/2 · (r_ja,c − r_en,c)
  (the symmetric Kitagawa/Oaxaca split of the in-support gap r_ja^S − r_en^S).
- out_of_support = gap − (r_ja^S − r_en^S): what the rows in classes that only one
  language fills add. It is reported with its share of rows, and it is evidence for
  neither hypothesis: a class only Japanese has (kanji) cannot be "harder in Japanese",
  nor can its share be compared.

When the support covers less than ``min_support`` of either language's judged rows,
composition, within and out-of-support are not estimable: they are null with the reason
(never 0 with a [0, 0] interval). The support is fixed on the data and kept in every
bootstrap replicate (inference conditional on the support).

The H2 contrast is a difference in differences over confidence bins shared by both
drafter families on the same prompts:

    DiD = Σ_S w_b [(r_ja,b − r_en,b)_trained − (r_ja,b − r_en,b)_training-free]

with w_b the mean of the four (language × family) in-support shares, so both families'
within-confidence gaps are weighted alike. The training-free (n-gram) drafter has no
training data to lack; what it shares with the trained drafter at equal target
confidence is not attributable to the trained drafter's data.

Confidence bins are quantile bins of the target's top-1 probability pooled over every
judged row of the analysis, so the same edges serve every family and language and the
estimand does not move with which rows a family happens to judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler, Totals, as_float, missing
from tokenlens.analysis.columns import label_codes
from tokenlens.analysis.comparable import not_comparable
from tokenlens.arrays import F64, I64, Mask

JA, EN = "ja", "en"
CONF_BINS = 20
"""Quantile bins of the target's confidence: enough that a bin is narrow (residual
confounding inside a bin is what would leak composition into within), few enough that
each bin of each language fills at a few hundred judged rows per language."""


@dataclass(frozen=True)
class Support:
    """Thresholds of common support (recorded in summary.json settings)."""

    min_rows: int = 10
    min_prompts: int = 3
    min_support: float = 0.5

    def to_json(self) -> dict[str, Any]:
        return {
            "min_rows": self.min_rows,
            "min_prompts": self.min_prompts,
            "min_support": self.min_support,
        }


def lang_code(frame: pd.DataFrame) -> I64:
    """0 for Japanese, 1 for English, -1 otherwise."""
    return label_codes(frame, "lang", [JA, EN])


def has_pair(frame: pd.DataFrame, rows: Mask | None = None) -> bool:
    """Both Japanese and English rows are present (among ``rows``)."""
    code = lang_code(frame)
    if rows is not None:
        code = code[rows]
    return bool((code == 0).any() and (code == 1).any())


def confidence_bins(
    frame: pd.DataFrame, rows: Mask, n_bins: int = CONF_BINS
) -> tuple[I64, list[str]]:
    """Per row, its pooled quantile bin of ``top1_prob`` (−1 outside ``rows``/unknown)."""
    if "top1_prob" not in frame:
        return np.full(len(frame), -1, dtype=np.int64), []
    q = frame["top1_prob"].to_numpy(dtype=np.float64)
    use = rows & np.isfinite(q)
    if not use.any():
        return np.full(len(frame), -1, dtype=np.int64), []
    edges = np.unique(np.quantile(q[use], bin_quantiles(n_bins)))
    inner, labels = bins_of(edges)
    codes = np.searchsorted(inner, q, side="right").astype(np.int64)
    codes = np.where(use, codes, -1)
    return codes, labels


def bin_quantiles(n_bins: int = CONF_BINS) -> F64:
    """The quantiles whose values bound the confidence bins: 0, 1/n, ..., 1."""
    return np.linspace(0.0, 1.0, n_bins + 1)


def bins_of(edges: F64) -> tuple[F64, list[str]]:
    """The inner edges and the labels of the bins bounded by ``edges`` (sorted, distinct):
    a value's bin is the number of inner edges at or below it."""
    inner = edges[1:-1]
    bounds = [float(edges[0]), *map(float, inner), float(edges[-1])]
    return inner, [f"{lo:.3f}-{hi:.3f}" for lo, hi in pairwise(bounds)]


def _totals(
    frame: pd.DataFrame, rs: Resampler, cell: I64, n_cells: int, rows: Mask
) -> tuple[Totals, Totals, I64]:
    acc = frame["accepted"].to_numpy(dtype=np.float64)
    num, den, cells = rs.counted(acc, cell, n_cells, rows)
    return num, den, cells.clusters()


def _est(point: F64, boot: F64, rs: Resampler, g: int, h: int, n: int, i: int) -> dict[str, Any]:
    return rs.effect(float(point[i]), boot[..., i], g, h, n)


def decompose(
    frame: pd.DataFrame,
    rs: Resampler,
    codes: I64,
    labels: list[str],
    rows: Mask,
    support: Support,
    column: str,
) -> dict[str, Any] | None:
    """Three-way split of the judged gap over the classes ``codes`` (None: no JA or EN)."""
    k = len(labels)
    code = lang_code(frame)
    keep = rows & (code >= 0) & (codes >= 0)
    if k == 0 or not has_pair(frame, keep):
        return None
    cell = np.where(keep, code * k + codes, -1)
    num, den, prompts = _totals(frame, rs, cell, 2 * k, keep)
    n_ja, n_en = den.point[:k], den.point[k:]
    # a class whose tokens differ in kind across languages is not common support
    alike = np.array([not_comparable(column, label) is None for label in labels], dtype=bool)
    shared = (
        (n_ja >= support.min_rows)
        & (n_en >= support.min_rows)
        & (prompts[:k] >= support.min_prompts)
        & (prompts[k:] >= support.min_prompts)
        & alike
    )
    share_ja = float(n_ja[shared].sum() / n_ja.sum())
    share_en = float(n_en[shared].sum() / n_en.sum())
    g, h = rs.design(keep)
    n_total = int(den.point.sum())

    def fn(a: F64, n: F64) -> F64:
        a2 = a.reshape(*a.shape[:-1], 2, k)
        n2 = n.reshape(*n.shape[:-1], 2, k)
        r_lang = a2.sum(-1) / n2.sum(-1)
        gap = r_lang[..., 0] - r_lang[..., 1]
        r = a2 / n2  # NaN where a replicate drew no row of a class
        n_s = np.where(shared, n2, 0.0)
        v = n_s / n_s.sum(-1, keepdims=True)
        r_s = np.where(shared, r, 0.0)
        in_ja = (v[..., 0, :] * r_s[..., 0, :]).sum(-1)
        in_en = (v[..., 1, :] * r_s[..., 1, :]).sum(-1)
        mean_r = (r_s[..., 0, :] + r_s[..., 1, :]) / 2.0
        pool = (in_ja + in_en) / 2.0
        dv = v[..., 0, :] - v[..., 1, :]
        comp_c = np.where(shared, dv * (mean_r - pool[..., None]), 0.0)
        within_c = np.where(
            shared, (v[..., 0, :] + v[..., 1, :]) / 2.0 * (r_s[..., 0, :] - r_s[..., 1, :]), 0.0
        )
        w_full = n2 / n2.sum(-1, keepdims=True)
        base = np.stack([in_ja, in_en], axis=-1)[..., None]
        out_lang = np.where(shared | (n2 == 0), 0.0, w_full * (np.nan_to_num(r) - base))
        out_c = out_lang[..., 0, :] - out_lang[..., 1, :]
        comp, within = comp_c.sum(-1), within_c.sum(-1)
        out = gap - (in_ja - in_en)
        parts = [x[..., None] for x in (gap, comp, within, out)]
        return np.asarray(np.concatenate([*parts, comp_c, within_c, out_c], axis=-1))

    with np.errstate(divide="ignore", invalid="ignore"):
        point, boot = fn(num.point, den.point), fn(num.boot, den.boot)
    reason = None
    if not shared.any():
        reason = "no class has enough judged rows from both languages"
    elif min(share_ja, share_en) < support.min_support:
        reason = (
            f"the classes both languages fill cover {share_ja:.0%} of Japanese and "
            f"{share_en:.0%} of English judged rows (at least {support.min_support:.0%} needed)"
        )
    result: dict[str, Any] = {
        "column": column,
        "gap": _est(point, boot, rs, g, h, n_total, 0),
        "support": {
            "share_ja": share_ja,
            "share_en": share_en,
            "classes": int(shared.sum()),
            "classes_total": int(((n_ja + n_en) > 0).sum()),
        },
    }
    for i, name in ((1, "composition"), (2, "within"), (3, "out_of_support")):
        result[name] = (
            missing(reason, n_total) if reason else _est(point, boot, rs, g, h, n_total, i)
        )
    if not reason and share_ja == 1.0 and share_en == 1.0:
        result["out_of_support"] = {
            "value": 0.0,
            "ci_low": None,
            "ci_high": None,
            "n": 0,
            "no_interval": "every judged row lies in classes both languages fill: exactly zero",
        }
    if reason:
        result["not_estimable"] = reason
    classes = []
    for c, label in enumerate(labels):
        if n_ja[c] + n_en[c] == 0:
            continue
        rows_c = int(n_ja[c] + n_en[c])
        entry: dict[str, Any] = {
            "class": label,
            "shared": bool(shared[c]),
            "share_ja": float(n_ja[c] / n_ja.sum()),
            "share_en": float(n_en[c] / n_en.sum()),
            "rows_ja": int(n_ja[c]),
            "rows_en": int(n_en[c]),
            "rate_ja": as_float(num.point[c] / n_ja[c]) if n_ja[c] else None,
            "rate_en": as_float(num.point[k + c] / n_en[c]) if n_en[c] else None,
        }
        if not reason:
            if shared[c]:
                entry["composition"] = _est(point, boot, rs, g, h, rows_c, 4 + c)
                entry["within"] = _est(point, boot, rs, g, h, rows_c, 4 + k + c)
            else:
                entry["out_of_support"] = _est(point, boot, rs, g, h, rows_c, 4 + 2 * k + c)
        classes.append(entry)
    result["classes"] = classes
    return result


def did(
    frame: pd.DataFrame,
    rs: Resampler,
    codes: I64,
    labels: list[str],
    rows: Mask,
    trained: Mask,
    support: Support,
) -> dict[str, Any]:
    """The H2 contrast: within-confidence JA gap of trained minus training-free drafters.

    Returns ``{difference, within_trained, within_training_free, support}``; every part
    is null with a reason when the four cells do not share enough bins.
    """
    k = len(labels)
    code = lang_code(frame)
    fam = np.where(trained, 0, 1)
    keep = rows & (code >= 0) & (codes >= 0)
    cell = np.where(keep, (fam * 2 + code) * k + codes, -1)  # (family, lang, bin)
    num, den, prompts = _totals(frame, rs, cell, 4 * k, keep)
    n4 = den.point.reshape(4, k)
    p4 = prompts.reshape(4, k)
    shared = (n4 >= support.min_rows).all(axis=0) & (p4 >= support.min_prompts).all(axis=0)
    totals = n4.sum(axis=1)
    shares = [float(n4[i, shared].sum() / totals[i]) if totals[i] else 0.0 for i in range(4)]
    g, h = rs.design(keep)
    n_total = int(den.point.sum())
    names = ("trained_ja", "trained_en", "training_free_ja", "training_free_en")
    base: dict[str, Any] = {
        "support": {
            **{f"share_{name}": share for name, share in zip(names, shares, strict=True)},
            "bins": int(shared.sum()),
            "bins_total": k,
        }
    }
    reason = None
    if (totals == 0).any():
        missing_cells = [name for name, t in zip(names, totals, strict=True) if t == 0]
        reason = f"no judged rows with target confidence for {', '.join(missing_cells)}"
    elif not shared.any():
        reason = "no confidence bin has enough judged rows in all four language x drafter cells"
    elif min(shares) < support.min_support:
        reason = (
            "the confidence bins all four language x drafter cells fill cover only "
            f"{min(shares):.0%} of one cell's judged rows "
            f"(at least {support.min_support:.0%} needed)"
        )
    if reason:
        for name in ("difference", "within_trained", "within_training_free"):
            base[name] = missing(reason, n_total)
        base["not_estimable"] = reason
        return base

    def fn(a: F64, n: F64) -> F64:
        a4 = a.reshape(*a.shape[:-1], 4, k)
        n4_ = n.reshape(*n.shape[:-1], 4, k)
        r = np.where(shared, a4 / n4_, 0.0)
        n_s = np.where(shared, n4_, 0.0)
        v = n_s / n_s.sum(-1, keepdims=True)
        w = v.mean(axis=-2)
        within_t = (w * (r[..., 0, :] - r[..., 1, :])).sum(-1)
        within_f = (w * (r[..., 2, :] - r[..., 3, :])).sum(-1)
        return np.stack([within_t - within_f, within_t, within_f], axis=-1)

    with np.errstate(divide="ignore", invalid="ignore"):
        point, boot = fn(num.point, den.point), fn(num.boot, den.boot)
    for i, name in enumerate(("difference", "within_trained", "within_training_free")):
        base[name] = _est(point, boot, rs, g, h, n_total, i)
    # H2's rule reads the difference and the trained drafters' within gap together: its
    # power needs how the two move together across replicates (they share the trained
    # drafter's rows).
    ok = np.isfinite(boot[:, 0]) & np.isfinite(boot[:, 1])
    corr = None
    if ok.sum() > 2 and np.std(boot[ok, 0]) > 0 and np.std(boot[ok, 1]) > 0:
        corr = as_float(np.corrcoef(boot[ok, 0], boot[ok, 1])[0, 1])
    base["correlation"] = {"difference_within_trained": corr}
    return base
