"""What both verdicts read, computed once (:class:`Parts`): per drafter family its rates,
judged gap and split by the target's confidence, and H2's contrast; with the row masks
of the drafter families, their configurations and prompts.

:func:`compute_parts` reads the joined frame; :func:`parts_of` the same from two views
(:class:`View`: every row, the judged rows), which is how per-request counts, whose rows
stand for events or for judged rows, give the same parts
(:mod:`~tokenlens.analysis.request_figures`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler, prompt_keys
from tokenlens.analysis.breakdown import per_lang, row_mask
from tokenlens.analysis.columns import labels as label_values
from tokenlens.analysis.decompose import (
    EN,
    JA,
    Support,
    confidence_bins,
    decompose,
    did,
    has_pair,
)
from tokenlens.analysis.gap import gap
from tokenlens.analysis.rules import FREE, TRAINED, Rules, apply_control
from tokenlens.analysis.summary_fields import typed
from tokenlens.analysis.summary_figures import Estimate, Rate, Split
from tokenlens.analysis.summary_gaps import Contrast, Family
from tokenlens.arrays import I64, Mask
from tokenlens.engine.methods import family_of


def families(frame: pd.DataFrame) -> dict[str, Mask]:
    """Row masks of the trained and training-free drafter families present.

    Each row's family is its ``family`` column (the pipeline's, declarations included),
    else the method table's for its ``method``: a method neither knows is refused
    (:func:`tokenlens.engine.methods.family_of`), never taken for a trained drafter.
    """
    if "family" in frame:
        family = label_values(frame, "family")
    else:
        method = frame["method"].astype(str)
        family = method.map({m: family_of(m) for m in method.unique()}).to_numpy()
    out = {}
    for name in (TRAINED, FREE):
        rows = family == name
        if rows.any():
            out[name] = rows
    return out


def configurations(frame: pd.DataFrame, rows: Mask) -> list[list[Any]]:
    """The distinct (method, k) run configurations among ``rows``, sorted."""
    method = label_values(frame, "method")[rows]
    k = frame["k"].to_numpy()[rows] if "k" in frame else np.zeros(int(rows.sum()), np.int64)
    distinct = pd.DataFrame({"m": method, "k": k}).drop_duplicates()
    pairs = {(str(m), int(x)) for m, x in zip(distinct["m"], distinct["k"], strict=True)}
    return [[m, x] for m, x in sorted(pairs)]


def prompts_per_lang(frame: pd.DataFrame, rows: Mask | None = None) -> dict[str, int]:
    """Distinct prompts per language (among ``rows``): the units of evidence."""
    lang = label_values(frame, "lang")
    keys = prompt_keys(frame)
    if rows is not None:
        lang, keys = lang[rows], keys[rows]
    return {x: len(set(keys[lang == x])) for x in (JA, EN)}


@dataclass(frozen=True)
class Parts:
    """Everything the verdicts read, computed once (``families`` and ``contrast`` are
    also summary.json's ``families`` and ``h2_contrast``)."""

    families: dict[str, Family]
    contrast: Contrast | None
    prompts: dict[str, int]
    conf_rows: int
    df: int


@dataclass(frozen=True)
class View:
    """Rows as the figure functions read them: a frame, its resampler, each drafter
    family's rows and every row this view counts (``rows``). The analysis reads one
    frame through two views (every row; the judged rows); per-request counts need two
    frames, whose rows stand for events and for judged rows
    (:mod:`~tokenlens.analysis.request_figures`)."""

    frame: pd.DataFrame
    rs: Resampler
    families: dict[str, Mask]
    rows: Mask


def compute_parts(
    frame: pd.DataFrame, rs: Resampler, support: Support, control_range: float = Rules.control_range
) -> Parts:
    """Per family: judged gap and split by confidence; the H2 contrast (:func:`apply_control`)."""
    judged = row_mask(frame, "judged")
    fams = families(frame)
    top1 = frame["top1_prob"].to_numpy(dtype=np.float64) if "top1_prob" in frame else None
    conf_rows = judged & np.isfinite(top1) if top1 is not None else np.zeros(len(frame), bool)
    codes, labels = confidence_bins(frame, conf_rows)
    every = View(frame, rs, fams, np.ones(len(frame), dtype=bool))
    judged_rows = View(frame, rs, {name: judged & mask for name, mask in fams.items()}, judged)
    return parts_of(every, judged_rows, (codes, labels, conf_rows), support, control_range)


def parts_of(
    every: View,
    judged: View,
    bins: tuple[I64, list[str], Mask],
    support: Support,
    control_range: float = Rules.control_range,
) -> Parts:
    """:func:`compute_parts` from its two views: ``every`` row and the ``judged`` rows,
    and the judged rows' confidence ``bins`` (codes, labels, the rows with a bin)."""
    codes, labels, conf_rows = bins
    frame = every.frame
    out: dict[str, Family] = {}
    for name, mask in every.families.items():
        rows = judged.families[name]
        family = Family(
            name=name,
            methods=tuple(sorted(set(label_values(frame, "method")[mask]))),
            runs=tuple(sorted(set(label_values(frame, "run")[mask]))),
            configurations=tuple((str(m), int(k)) for m, k in configurations(frame, mask)),
            # vLLM's rate over every run of the family: pooled over k when the family
            # has several (``configurations``); read per run (``runs[]``) then.
            acceptance=rate_records(per_lang(frame, every.rs, mask, 0)),
            acceptance_judged=rate_records(per_lang(judged.frame, judged.rs, rows, 0)),
            prompts=prompts_per_lang(frame, mask),
        )
        if has_pair(judged.frame, rows):
            dec = decompose(
                judged.frame, judged.rs, codes, labels, conf_rows & rows, support, "confidence"
            )
            family = replace(
                family,
                gap_judged=typed(Estimate, gap(judged.frame, judged.rs, rows)),
                gap_all=typed(Estimate, gap(frame, every.rs, mask)),
                confidence=typed(Split, dec),
            )
        out[name] = family
    contrast = None
    fams = judged.families
    if TRAINED in fams and FREE in fams and has_pair(judged.frame, judged.rows):
        block = did(judged.frame, judged.rs, codes, labels, conf_rows, fams[TRAINED], support)
        block["bins"] = labels
        contrast = typed(Contrast, apply_control(block, control_range))
    g, h = judged.rs.design(judged.rows)
    n_conf = judged.rs.count(conf_rows)
    return Parts(out, contrast, prompts_per_lang(frame), n_conf, max(g - h, 0))


def rate_records(block: Mapping[str, Any]) -> dict[str, Rate]:
    """``{lang: Rate}`` from :func:`~tokenlens.analysis.breakdown.per_lang`."""
    return {lang: rate for lang, v in block.items() if (rate := typed(Rate, v)) is not None}
