"""What every chart of the reports is built from: inline data, one colour per language
on every chart of a page, rates and differences as chart rows.

Shared by the analysis charts (:mod:`tokenlens.report.charts`, ``charts_gap``,
``charts_speed``) and the bench report (:mod:`tokenlens.report.bench`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import altair as alt

from tokenlens.analysis.summary_figures import Rate
from tokenlens.analysis.summary_file import Summary
from tokenlens.format import finite, lang_order

Spec = dict[str, Any]
Row = dict[str, Any]

# Fixed colours so Japanese and English look the same in every chart of the page.
_LANG_COLOURS = ("#e45756", "#4c78a8", "#54a24b", "#b279a2", "#f58518", "#72b7b2")
WIDTH = 520


def inline_data(rows: list[Row]) -> alt.Data:
    """Inline rows (Altair's Data constructor is untyped)."""
    return alt.Data(values=rows)  # type: ignore[no-untyped-call]


def pp_value(value: Any) -> float | None:
    """A difference of rates in percentage points (JSON has no NaN, and Vega-Lite drops
    nulls from scales: :func:`~tokenlens.format.finite`)."""
    number = finite(value)
    return None if number is None else 100.0 * number


def languages(summary: Summary) -> list[str]:
    """Languages of the analysis, Japanese and English first (the comparison studied)."""
    return lang_order(summary.acceptance)


def lang_color(langs: list[str]) -> alt.Color:
    """Colour by ``lang`` with a fixed palette over ``langs`` (in that order), so a
    language has the same colour in every chart of a page."""
    colours = [_LANG_COLOURS[i % len(_LANG_COLOURS)] for i in range(len(langs))]
    return alt.Color("lang:N", title="language", scale=alt.Scale(domain=langs, range=colours))


def rate_rows(section: Mapping[str, Mapping[str, Rate]]) -> list[Row]:
    """Flatten ``{lang: {group: Rate}}`` into one row per (lang, group)."""
    return [
        {
            "lang": lang,
            "group": str(group),
            "rate": finite(stats.rate),
            "ci_low": finite(stats.ci_low),
            "ci_high": finite(stats.ci_high),
            "n": int(stats.n or 0),
            "sparse": bool(stats.sparse),
        }
        for lang, groups in section.items()
        for group, stats in groups.items()
    ]


def first_seen(values: Iterable[str]) -> list[str]:
    """Distinct values in first-seen order: the analysis writes buckets in scale order,
    a bench its cases in plan order."""
    return list(dict.fromkeys(values))
