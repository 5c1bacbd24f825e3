"""Differences of the judged JA − EN gap between drafters, with paired intervals.

Every drafter was traced on the same prompts, so the difference of two drafters' gaps
is estimated by one bootstrap that resamples prompt pairs jointly for both (each
analysis' own intervals resample within one drafter and cannot be subtracted). The gap
is the analysis' ``gap.judged``: judged draft-model rows, accepted / judged per
language, pooled over prompts, Japanese minus English. Intervals are bootstrap
percentiles (95%, and the 90% decision interval).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

COLUMNS = ["method", "pair", "lang", "judged", "accepted"]


def pair_counts(tokens: pd.DataFrame) -> pd.DataFrame:
    """Judged draft-model rows per prompt pair: accepted and judged counts per language."""
    t = tokens[(tokens["method"] == "draft_model") & tokens["judged"]]
    g = t.groupby(["pair", "lang"])["accepted"].agg(["sum", "count"]).unstack("lang", fill_value=0)
    g.columns = [f"{stat}_{lang}" for stat, lang in g.columns]
    for col in ("sum_ja", "sum_en", "count_ja", "count_en"):
        if col not in g:
            g[col] = 0
    return g.sort_index()


def read_counts(path: Path) -> pd.DataFrame:
    return pair_counts(pd.read_parquet(path, columns=COLUMNS))


def _gaps(c: pd.DataFrame, w: np.ndarray) -> np.ndarray:
    """The judged gap under pair weights ``w`` (replicates x pairs)."""
    ja = (w @ c["sum_ja"].to_numpy()) / (w @ c["count_ja"].to_numpy())
    en = (w @ c["sum_en"].to_numpy()) / (w @ c["count_en"].to_numpy())
    return np.asarray(ja - en)


def contrasts(
    counts: dict[str, pd.DataFrame],
    pairs_of: list[tuple[str, str]],
    replicates: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """gap(a) − gap(b) for each (a, b), resampling the pairs every drafter has."""
    common = sorted(set.intersection(*(set(c.index) for c in counts.values())))
    if len(common) < 2:
        return {"value": None, "reason": "fewer than two prompt pairs common to the drafters"}
    aligned = {k: c.loc[common] for k, c in counts.items()}
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(common), size=(replicates, len(common)))
    w = np.zeros((replicates, len(common)))
    np.add.at(w, (np.repeat(np.arange(replicates), len(common)), draws.ravel()), 1.0)
    ones = np.ones((1, len(common)))
    point = {k: float(_gaps(c, ones)[0]) for k, c in aligned.items()}
    boot = {k: _gaps(c, w) for k, c in aligned.items()}
    out: dict[str, Any] = {
        "method": "prompt-pair bootstrap, both drafters resampled with the same pairs; "
        "percentile intervals",
        "pairs": len(common),
        "replicates": replicates,
        "seed": seed,
        "differences": {},
    }
    for a, b in pairs_of:
        if a not in boot or b not in boot:
            continue
        d = boot[a] - boot[b]
        lo, hi, dlo, dhi = np.nanpercentile(d, [2.5, 97.5, 5.0, 95.0])
        out["differences"][f"{a} - {b}"] = {
            "value": point[a] - point[b],
            "ci_low": float(lo),
            "ci_high": float(hi),
            "decision_low": float(dlo),
            "decision_high": float(dhi),
        }
    return out
