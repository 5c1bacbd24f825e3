"""Where the gap concentrates: per-class Japanese − English differences, exploratory.

Looking through every class of every breakdown for the biggest differences is a search
over dozens of comparisons; picking the top few by point estimate and showing their
plain 95% intervals overstates what was found. So every class difference here carries
a Holm-adjusted p-value (family-wise error over all comparisons listed, which is valid
under any dependence between them) and a Bonferroni interval at level 1 − 0.05/m, the
simultaneous interval that matches Holm's first step. Both are labelled exploratory:
the verdicts never read them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from tokenlens.analysis.bootstrap import LEVEL, Resampler, as_float, interval, standard_error
from tokenlens.analysis.breakdown import group_codes
from tokenlens.analysis.decompose import Support, lang_code
from tokenlens.arrays import Mask

EXPLORE_COLUMNS = ("script", "pos", "particle_type", "boundary", "transition", "rank_bucket")
ADJUSTMENT = "holm"


def class_differences(
    frame: pd.DataFrame,
    rs: Resampler,
    families: dict[str, Mask],
    rows: Mask,
    support: Support,
    min_count: int,
) -> dict[str, Any]:
    """``{adjustment, level, comparisons, classes: [...]}``, largest |difference| first."""
    code = lang_code(frame)
    acc = frame["accepted"].to_numpy(dtype=np.float64)
    found: list[dict[str, Any]] = []
    points: list[float] = []
    ses: list[float] = []
    dfs: list[float] = []
    boots: list[np.ndarray[Any, Any]] = []
    for family, fam_rows in families.items():
        for column in EXPLORE_COLUMNS:
            if column not in frame:
                continue
            gcode, labels = group_codes(frame, column)
            k = len(labels)
            keep = rows & fam_rows & (code >= 0) & (gcode >= 0)
            if k == 0 or not keep.any():
                continue
            cell = np.where(keep, code * k + gcode, -1)
            num = rs.totals(acc, cell, 2 * k, keep)
            den = rs.totals(np.ones(len(frame)), cell, 2 * k, keep)
            prompts = rs.clusters_with(cell, 2 * k, keep)
            for c, label in enumerate(labels):
                n_ja, n_en = den.point[c], den.point[k + c]
                if (
                    min(n_ja, n_en) < min_count
                    or min(prompts[c], prompts[k + c]) < support.min_prompts
                ):
                    continue
                with np.errstate(divide="ignore", invalid="ignore"):
                    point = num.point[c] / n_ja - num.point[k + c] / n_en
                    boot = num.boot[:, c] / den.boot[:, c] - num.boot[:, k + c] / den.boot[:, k + c]
                g, h = rs.design(keep & (gcode == c))
                se = float(standard_error(boot[:, None], g, h)[0])
                found.append(
                    {
                        "family": family,
                        "by": column,
                        "class": label,
                        "rows_ja": int(n_ja),
                        "rows_en": int(n_en),
                        "rate_ja": as_float(num.point[c] / n_ja),
                        "rate_en": as_float(num.point[k + c] / n_en),
                        "_g": g,
                        "_h": h,
                    }
                )
                points.append(float(point))
                ses.append(se)
                dfs.append(float(max(g - h, 1)))
                boots.append(boot)
    m = len(found)
    if m == 0:
        return {"adjustment": ADJUSTMENT, "level": LEVEL, "comparisons": 0, "classes": []}
    p_raw = np.array(
        [
            2.0 * stats.t.sf(abs(pt) / se, df) if se > 0 and np.isfinite(se) else np.nan
            for pt, se, df in zip(points, ses, dfs, strict=True)
        ]
    )
    p_adj = holm(p_raw)
    level = 1.0 - (1.0 - LEVEL) / m
    for i, entry in enumerate(found):
        g, h = entry.pop("_g"), entry.pop("_h")
        lo, hi = interval(
            np.array([points[i]]), boots[i][:, None], g, h, method=rs.method, level=level
        )
        entry["difference"] = {
            "value": as_float(points[i]),
            "ci_low": as_float(lo[0]),
            "ci_high": as_float(hi[0]),
            "p_adjusted": as_float(p_adj[i]),
        }
    found.sort(key=lambda e: -abs(e["difference"]["value"] or 0.0))
    return {"adjustment": ADJUSTMENT, "level": level, "comparisons": m, "classes": found}


def holm(p: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Holm's step-down adjusted p-values (NaN stays NaN and is not counted)."""
    p = np.asarray(p, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(adjusted, 1.0)
    return out
