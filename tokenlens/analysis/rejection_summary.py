"""summary.json → ``rejections``: the kinds of :mod:`tokenlens.analysis.rejections` per
drafter family and per run, per language, with prompt-pair intervals.

Shares are over the rejections with a kind (``unknown``, where the output ended inside
the draft, is counted apart). ``resegmentation`` is ``merge`` + ``confirmed``: the
drafter wrote the target's text, cut into other tokens. Where the drafter's
continuation is unknown (a replay without ``--branch-drafts``, a k = 1 run) a
re-segmentation can hide in ``prefix_open``, so ``resegmentation`` is then a lower
bound and ``resegmentation`` + ``prefix_open`` an upper one; each run says whether its
continuation is known (``continuation``). Family blocks pool the family's runs as the
verdicts do (their ``runs`` say which); the per-run blocks pool nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler, estimate
from tokenlens.analysis.breakdown import lang_codes
from tokenlens.analysis.columns import label_codes, labels
from tokenlens.analysis.decompose import lang_code
from tokenlens.analysis.rejections import CATEGORIES, FLAGS, KINDS, RESEGMENTATION, UNKNOWN
from tokenlens.analysis.summary_figures import Share
from tokenlens.arrays import Mask

DEFINITION = (
    "For a rejection at p with D the draft's bytes, E the target's token there, T the "
    "target's bytes from p on and C = D + the drafter's later drafts of the step: merge "
    "(D longer than E, T starts with D), confirmed (D a strict prefix of E, C starts "
    "with E), prefix_diverged (D a strict prefix of E, C departs from E), prefix_open "
    "(D a strict prefix of E, C agrees but ends first: unknown), text (anything else). "
    "resegmentation = merge + confirmed."
)


def _shares(
    frame: pd.DataFrame, rs: Resampler, rows: Mask, values: np.ndarray[Any, Any]
) -> dict[str, dict[str, Any]]:
    """Per language: the share of ``rows`` where ``values`` is true, with its interval
    and ``count``."""
    lcode, langs = lang_codes(frame)
    num, den, cells = rs.counted(values.astype(np.float64), lcode, len(langs), rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        point, boot = num.point / den.point, num.boot / den.boot
    g, h = rs.design_of(cells)
    lo, hi = rs.rate_interval(point, boot, den.point, g, h)
    out = {}
    for li, lang in enumerate(langs):
        if den.point[li] == 0:
            continue
        figure = estimate(point[li], lo[li], hi[li], int(den.point[li]))
        out[lang] = Share.of(figure, int(num.point[li])).to_json()
    return out


def _difference(
    frame: pd.DataFrame, rs: Resampler, rows: Mask, values: np.ndarray[Any, Any]
) -> dict[str, Any]:
    """JA − EN of the share of ``rows`` where ``values`` is true."""
    code = lang_code(frame)
    keep = rows & (code >= 0)
    num, den, _ = rs.counted(values.astype(np.float64), code, 2, keep)
    with np.errstate(divide="ignore", invalid="ignore"):
        r_point, r_boot = num.point / den.point, num.boot / den.boot
    g, h = rs.design(keep)
    return rs.effect(
        float(r_point[0] - r_point[1]), r_boot[:, 0] - r_boot[:, 1], g, h, int(den.point.sum())
    )


def _block(frame: pd.DataFrame, rs: Resampler, mask: Mask) -> dict[str, Any]:
    """Counts, the share of each kind, of re-segmentations and of each flag per language."""
    # each row's kind as its index in CATEGORIES (-1: none), not a string comparison
    # per row and kind
    kind = label_codes(frame, "rejection_kind", CATEGORIES)
    rejected = frame["rejection_kind"].notna().to_numpy()
    unknown = kind == CATEGORIES.index(UNKNOWN)
    known = rejected & ~unknown
    rows = mask & known
    lcode, langs = lang_codes(frame)
    block: dict[str, Any] = {
        "runs": sorted(set(labels(frame, "run")[mask])),
        "rejections": {
            lang: int((mask & rejected & (lcode == li)).sum()) for li, lang in enumerate(langs)
        },
        UNKNOWN: {
            lang: int((mask & unknown & (lcode == li)).sum()) for li, lang in enumerate(langs)
        },
    }
    for name in KINDS:
        block[name] = _shares(frame, rs, rows, kind == CATEGORIES.index(name))
    reseg = np.isin(kind, [CATEGORIES.index(name) for name in RESEGMENTATION])
    block["resegmentation"] = _shares(frame, rs, rows, reseg)
    if "rejection_whitespace" in frame:
        _, space = _flag(frame, "rejection_whitespace")
        block["resegmentation_whitespace"] = _shares(frame, rs, rows & reseg, space)
    for flag in FLAGS:
        flagged, values = _flag(frame, flag)
        block[flag] = _shares(frame, rs, mask & flagged, values)
    block["resegmentation_gap"] = _difference(frame, rs, rows, reseg)
    return block


def _flag(frame: pd.DataFrame, column: str) -> tuple[Mask, Mask]:
    """A flag column with missing values (a nullable boolean, or objects): where it is
    set, and its value there (False where missing), without a Python object per row."""
    series = frame[column]
    known: Mask = series.notna().to_numpy()
    values: Mask = series.to_numpy(dtype=bool, na_value=False)
    return known, values


def continuation(frame: pd.DataFrame, mask: Mask) -> dict[str, Any]:
    """Whether the drafter's drafts after a step's first rejection are known among
    ``mask`` (one run): ``known``, ``unknown`` (all −1: a replay without
    ``--branch-drafts``), ``partly known``, or ``none proposed`` (no draft ever follows
    a rejection: k = 1)."""
    after = mask & frame["emitted_token_id"].isna().to_numpy()
    hidden = after & (frame["draft_token_id"].to_numpy() < 0)
    n_after, n_hidden = int(after.sum()), int(hidden.sum())
    if n_after == 0:
        state = "none proposed"
    elif n_hidden == 0:
        state = "known"
    elif n_hidden == n_after:
        state = "unknown"
    else:
        state = "partly known"
    return {"continuation": state, "later_drafts": n_after, "later_drafts_unknown": n_hidden}


def rejection_section(
    frame: pd.DataFrame, rs: Resampler, families: dict[str, Mask]
) -> dict[str, Any] | None:
    """``{kinds, resegmentation, definition, families {family: block}, runs {run:
    {method, k, family, continuation, ..., block}}}`` (None without the
    ``rejection_kind`` column: a frame built before it, or a simulated one)."""
    if "rejection_kind" not in frame:
        return None
    out: dict[str, Any] = {
        "kinds": list(KINDS),
        "resegmentation": list(RESEGMENTATION),
        "definition": DEFINITION,
        "families": {name: _block(frame, rs, mask) for name, mask in families.items()},
        "runs": {},
    }
    run_labels = labels(frame, "run")
    for label in pd.unique(run_labels):
        mine = run_labels == label
        first = int(np.flatnonzero(mine)[0])
        family = next((name for name, mask in families.items() if mask[first]), None)
        out["runs"][label] = {
            "method": str(frame["method"].iloc[first]),
            "k": int(frame["k"].iloc[first]) if "k" in frame else None,
            "family": family,
            **continuation(frame, mine),
            **_block(frame, rs, mine),
        }
    return out
