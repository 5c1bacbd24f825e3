"""summary.json ``gap``: the gap of the primary drafter family and its descriptive
splits (:func:`gap_section`), with the logistic model fitted apart (:func:`fit`), before
:mod:`~tokenlens.analysis.summarize` forks the process that computes this section.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from tokenlens.analysis.bootstrap import Resampler
from tokenlens.analysis.breakdown import group_codes
from tokenlens.analysis.config import AnalyzeConfig
from tokenlens.analysis.decompose import decompose, has_pair
from tokenlens.analysis.explore import class_differences
from tokenlens.analysis.gap import gap, regression
from tokenlens.analysis.parts import families
from tokenlens.analysis.rules import FREE, TRAINED
from tokenlens.analysis.standardise import COLUMN as LENGTH_COLUMN
from tokenlens.analysis.standardise import length_split
from tokenlens.analysis.summary_fields import typed
from tokenlens.analysis.summary_figures import Estimate, Split
from tokenlens.analysis.summary_gaps import Explore, Gap
from tokenlens.analysis.token_classes import decomposed
from tokenlens.arrays import Mask

DESCRIBE_BY = decomposed()  # from the token-class table, in the decomposition's order


def gap_rows(frame: pd.DataFrame, judged: Mask) -> tuple[str, Mask, Mask] | None:
    """The ``gap`` section's family (trained drafters when present), its rows and its
    judged rows; None without that family or without both languages."""
    fams = families(frame)
    family = TRAINED if TRAINED in fams else FREE if FREE in fams else None
    if family is None:
        return None
    mask = fams[family]
    rows = judged & mask
    return (family, mask, rows) if has_pair(frame, rows) else None


def fit(frame: pd.DataFrame, judged: Mask, config: AnalyzeConfig) -> dict[str, Any] | None:
    """The ``gap`` section's logistic model (None where the section has none, or without
    ``config.regression``). Fitted before the process computing :func:`gap_section` is
    forked: its fit is the figures' largest transient (a fixed sample of rows, about 0.6
    GiB), which would otherwise add to that process's temporaries."""
    found = gap_rows(frame, judged)
    if found is None or not config.regression:
        return None
    return regression(frame, "script", found[2], config.min_count, config.seed)


def gap_section(
    frame: pd.DataFrame,
    rs: Resampler,
    judged: Mask,
    config: AnalyzeConfig,
    fitted: dict[str, Any] | None,
) -> Gap | None:
    """summary.json ``gap``: the gap of the primary family (never pooled across
    families), its descriptive splits and its logistic model (``fitted``, from
    :func:`fit`); None without that family or without both languages."""
    found = gap_rows(frame, judged)
    if found is None:
        return None
    family, mask, rows = found
    fams = families(frame)
    decomposition: dict[str, Split] = {}
    for column in DESCRIBE_BY:
        if column in frame:
            codes, labels = group_codes(frame, column)
            dec = typed(Split, decompose(frame, rs, codes, labels, rows, config.support, column))
            if dec is not None:
                decomposition[column] = dec
    by_length = typed(Split, length_split(frame, rs, rows, config.support))
    if by_length is not None:
        decomposition[LENGTH_COLUMN] = by_length
    explore = class_differences(frame, rs, fams, judged, config.support, config.min_count)
    return Gap(
        family=family,
        overall=typed(Estimate, gap(frame, rs, mask)),
        judged=typed(Estimate, gap(frame, rs, rows)),
        relative_judged=typed(Estimate, gap(frame, rs, rows, relative=True)),
        decomposition=decomposition,
        explore=typed(Explore, explore),
        regression=fitted,
    )
