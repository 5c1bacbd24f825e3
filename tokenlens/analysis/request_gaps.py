"""The Japanese − English gap from per-request counts: what ``request-figures`` adds
to its rates, with :mod:`~tokenlens.analysis.gap` and
:mod:`~tokenlens.analysis.standardise` run unchanged on counted rows.

Per drafter family, as summary.json's ``families``: ``gap_all`` (vLLM's rate, every
draft) and ``gap_judged`` (judged rows), and, from a table counted by token byte length
(``request-stats --by n_bytes``), ``gap_length_standardised`` (the gap with the
languages' byte lengths standardised away, with its split and both standards). For the
primary family (trained drafters when present), summary.json's ``gap`` section:
``overall``, ``judged``, ``relative_judged`` and, by byte length, the decomposition's
``byte_length`` split. Every one is a function of per-language (and per-stratum)
sums of whole numbers over prompt pairs, so each equals the analysis' own to the last
digit. Left out: the decomposition by a token class (its sums over classes run in the
order of the classes' first appearance in the events, which the table does not keep),
the confidence split and the H2 contrast (their bins are quantiles of every judged
row's target confidence), the exploration and the logistic model (rows).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tokenlens.analysis.decompose import Support, has_pair
from tokenlens.analysis.gap import gap
from tokenlens.analysis.request_runs import CountedRows, estimate_json
from tokenlens.analysis.standardise import COLUMN as LENGTH_SPLIT
from tokenlens.analysis.standardise import length_split, length_standardised
from tokenlens.analysis.summary_fields import json_value, typed
from tokenlens.analysis.summary_figures import Estimate, LengthStandardised, Split
from tokenlens.arrays import Mask

LENGTH = "n_bytes"
"""The class column whose counts give the length-standardised gap (its byte strata)."""


def family_gaps(
    events: CountedRows,
    judged: CountedRows,
    rows: tuple[Mask, Mask],
    by: str,
    support: Support,
    ks: list[int],
    name: str,
) -> dict[str, Any]:
    """summary.json ``families.<name>``'s gaps: ``gap_judged``, ``gap_all`` and, with
    ``by`` :data:`LENGTH`, ``gap_length_standardised`` (none without judged rows of
    both languages); ``rows``: the family's rows among ``events`` and ``judged``;
    labelled ``pooled_over_k`` when ``ks`` has several k, as the analysis labels them."""
    all_rows, judged_rows = rows
    if not has_pair(judged.frame, judged_rows):
        return {}
    found: dict[str, Estimate | None] = {
        "gap_judged": typed(Estimate, gap(judged.frame, judged.rs, judged_rows)),
        "gap_all": typed(Estimate, gap(events.frame, events.rs, all_rows)),
    }
    if by == LENGTH:
        standardised = length_standardised(judged.frame, judged.rs, judged_rows, support)
        found["gap_length_standardised"] = typed(LengthStandardised, standardised)
    out: dict[str, Any] = {}
    for key, figure in found.items():
        if figure is not None and len(ks) >= 2:
            figure = replace(figure, pooled_over_k=tuple(ks), family=name)
        out[key] = json_value(figure)
    return out


def gap_block(
    events: CountedRows,
    judged: CountedRows,
    rows: tuple[Mask, Mask],
    by: str,
    support: Support,
    name: str,
) -> dict[str, Any] | None:
    """summary.json ``gap`` of family ``name`` (the primary one) without what needs the
    rows: ``family``, ``overall``, ``judged``, ``relative_judged`` and ``decomposition``
    (``byte_length`` with ``by`` :data:`LENGTH`, else empty); None without judged rows
    of both languages, as the analysis gives."""
    all_rows, judged_rows = rows
    if not has_pair(judged.frame, judged_rows):
        return None
    decomposition: dict[str, Any] = {}
    if by == LENGTH:
        split = typed(Split, length_split(judged.frame, judged.rs, judged_rows, support))
        if split is not None:
            decomposition[LENGTH_SPLIT] = json_value(split)
    return {
        "family": name,
        "overall": estimate_json(gap(events.frame, events.rs, all_rows)),
        "judged": estimate_json(gap(judged.frame, judged.rs, judged_rows)),
        "relative_judged": estimate_json(gap(judged.frame, judged.rs, judged_rows, relative=True)),
        "decomposition": decomposition,
    }
