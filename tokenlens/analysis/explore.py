"""Where the gap concentrates: per-class Japanese − English differences, exploratory.

Looking through every class of every breakdown for the biggest differences is a search
over dozens of comparisons; picking the top few by point estimate and showing their
plain 95% intervals overstates what was found. So every class difference here carries
a Holm-adjusted p-value (family-wise error over all comparisons listed, which is valid
under any dependence between them) and a Bonferroni interval at level 1 − 0.05/m, the
simultaneous interval that matches Holm's first step. Both are labelled exploratory:
the verdicts never read them. Classes whose tokens differ in kind across languages
(:mod:`tokenlens.analysis.comparable`) are not searched.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tokenlens.analysis.bootstrap import LEVEL, Resampler, as_float, interval
from tokenlens.analysis.classes import differences, holm, p_values
from tokenlens.analysis.comparable import not_comparable
from tokenlens.analysis.decompose import Support
from tokenlens.analysis.token_classes import explored
from tokenlens.arrays import Mask

__all__ = ["ADJUSTMENT", "EXPLORE_COLUMNS", "class_differences", "holm"]

EXPLORE_COLUMNS = explored()  # from the token-class table
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
    found: list[dict[str, Any]] = []
    found_d: list[tuple[Any, int]] = []
    for family, fam_rows in families.items():
        for column in EXPLORE_COLUMNS:
            if column not in frame:
                continue
            d = differences(frame, rs, rows & fam_rows, column)
            for c, label in enumerate(d.labels):
                if (
                    min(d.rows_ja[c], d.rows_en[c]) < min_count
                    or min(d.prompts_ja[c], d.prompts_en[c]) < support.min_prompts
                    or not_comparable(column, label)  # differs in kind (.comparable)
                ):
                    continue
                found.append(
                    {
                        "family": family,
                        "by": column,
                        "class": label,
                        "rows_ja": int(d.rows_ja[c]),
                        "rows_en": int(d.rows_en[c]),
                        "rate_ja": None,
                        "rate_en": None,
                    }
                )
                found_d.append((d, c))
    m = len(found)
    if m == 0:
        return {"adjustment": ADJUSTMENT, "level": LEVEL, "comparisons": 0, "classes": []}
    p_raw = np.concatenate([p_values(d, [c]) for d, c in found_d])
    p_adj = holm(p_raw)
    level = 1.0 - (1.0 - LEVEL) / m
    for i, entry in enumerate(found):
        d, c = found_d[i]
        lo, hi = interval(
            d.point[c : c + 1], d.boot[:, c : c + 1], int(d.g[c]), int(d.h[c]), rs.method, level
        )
        entry["rate_ja"] = as_float(d.rate_ja[c])
        entry["rate_en"] = as_float(d.rate_en[c])
        entry["difference"] = {
            "value": as_float(d.point[c]),
            "ci_low": as_float(lo[0]),
            "ci_high": as_float(hi[0]),
            "p_adjusted": as_float(p_adj[i]),
        }
    found.sort(key=lambda e: -abs(e["difference"]["value"] or 0.0))
    return {"adjustment": ADJUSTMENT, "level": level, "comparisons": m, "classes": found}
