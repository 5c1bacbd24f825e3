"""The verdicts from a table counted by the target's confidence (``request-stats --by
confidence``): the parts they read, H1 and H2, and, given every family's
length-standardised gap (from the table by ``n_bytes``, ``request-stats --by all``),
their sensitivity, each k's verdicts included.

The functions are the analysis' own (:func:`~tokenlens.analysis.parts.parts_of`,
:func:`~tokenlens.analysis.verdicts.decide`, :mod:`~tokenlens.analysis.sensitivity`),
fed two views of counted rows (every row, the judged rows); a row's bin is the table's
``class`` (among the edges ``class_edges``, over every row) or ``class_k`` (among
``class_k_edges``, its k's own, for the per-k verdicts: the analysis bins each k's rows
anew).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from tokenlens.analysis.decompose import Support, bins_of
from tokenlens.analysis.parts import Parts, View, parts_of
from tokenlens.analysis.request_runs import CountedRows
from tokenlens.analysis.rules import FREE, TRAINED, Rules
from tokenlens.analysis.sensitivity import k_entry, with_sensitivity
from tokenlens.analysis.summary_fields import json_value, typed
from tokenlens.analysis.summary_figures import LengthStandardised
from tokenlens.analysis.verdicts import decide
from tokenlens.arrays import I64, Mask
from tokenlens.errors import TokenlensError

Labels = np.ndarray[Any, np.dtype[np.object_]]


@dataclass(frozen=True)
class Counts:
    """A table by confidence as the verdicts read it: the table (``stats``), its rows
    standing for events and for judged rows, and each table row's drafter family."""

    stats: pd.DataFrame
    events: CountedRows
    judged: CountedRows
    family_of: Labels


def verdicts(
    counts: Counts, rules: Rules, support: Support, standardised: Mapping[str, Any] | None
) -> tuple[Parts, dict[str, Any]]:
    """The parts and ``{"h2_contrast", "hypotheses"}`` as summary.json holds them; the
    hypotheses with their ``sensitivity`` when ``standardised`` (each family's
    ``gap_length_standardised``, as summary.json holds it) is given."""
    stats, events, judged = counts.stats, counts.events, counts.judged
    codes = _codes(judged.frame["confidence"])
    labels = _labels(stats["class_edges"])
    parts = _parts(events, judged, counts.family_of, (codes, labels), rules, support)
    hypotheses = decide(events.frame, events.rs, rules, parts)
    if standardised is not None:
        families = {
            name: replace(
                family,
                gap_length_standardised=typed(LengthStandardised, standardised.get(name)),
            )
            for name, family in parts.families.items()
        }
        ks = per_k(counts, rules, support)
        hypotheses = with_sensitivity(hypotheses, replace(parts, families=families), ks, rules)
    out = {
        "h2_contrast": json_value(parts.contrast),
        "hypotheses": {name: json_value(h) for name, h in hypotheses.items()},
    }
    return parts, out


def per_k(counts: Counts, rules: Rules, support: Support) -> dict[str, dict[str, Any]]:
    """:func:`~tokenlens.analysis.sensitivity.per_k` from the counts: each k's runs
    alone, binned by their own edges (``class_k``); empty below two k."""
    stats, events, judged, family_of = counts.stats, counts.events, counts.judged, counts.family_of
    k_of = stats["k"].to_numpy()
    values = sorted({int(k) for k in k_of})
    if len(values) < 2:
        return {}
    if "class_k" not in stats:
        raise TokenlensError(
            "the table by confidence has no per-k bins (class_k): count it again with "
            "this request-stats"
        )
    out = {}
    for k in values:
        mine = k_of == k
        rows_e, rows_j = events.of(mine), judged.of(mine)
        sub_e = CountedRows(
            events.frame[rows_e].reset_index(drop=True),
            events.rs.restricted(rows_e),
            events.keep & mine,
        )
        sub_j = CountedRows(
            judged.frame[rows_j].reset_index(drop=True),
            judged.rs.restricted(rows_j),
            judged.keep & mine,
        )
        codes = _codes(sub_j.frame["class_k"])
        labels = _labels(stats["class_k_edges"][mine])
        parts = _parts(sub_e, sub_j, family_of, (codes, labels), rules, support)
        decided = decide(sub_e.frame, sub_e.rs, rules, parts)
        runs = sorted({str(r) for r in sub_e.frame["run"].to_numpy()})
        out[str(k)] = k_entry(parts, decided, runs, rules)
    return out


def _parts(
    events: CountedRows,
    judged: CountedRows,
    family_of: Labels,
    bins: tuple[I64, list[str]],
    rules: Rules,
    support: Support,
) -> Parts:
    """:func:`~tokenlens.analysis.parts.parts_of` of two views of counted rows
    (``family_of``: each table row's family; a view's ``keep`` says which are its)."""
    present = [f for f in (TRAINED, FREE) if (family_of == f).any()]

    def view(rows: CountedRows) -> View:
        masks: dict[str, Mask] = {f: (family_of == f)[rows.keep] for f in present}
        every = np.ones(len(rows.frame), dtype=bool)
        return View(rows.frame, rows.rs, masks, every)

    codes, labels = bins
    return parts_of(
        view(events), view(judged), (codes, labels, codes >= 0), support, rules.control_range
    )


def _codes(classes: pd.Series) -> I64:
    """The bins' indexes of the judged rows (-1: no bin)."""
    values = pd.to_numeric(classes, errors="coerce").to_numpy(dtype=np.float64)
    return np.where(np.isnan(values), -1, values).astype(np.int64)


def _labels(edges: pd.Series) -> list[str]:
    """The bins' labels from the edges the table records (one text on every row)."""
    found = {str(e) for e in edges.dropna().unique()}
    if len(found) > 1:
        raise TokenlensError("the table's rows hold different confidence bins: count it again")
    if not found:
        return []
    return bins_of(np.array([float(e) for e in found.pop().split(",")]))[1]
