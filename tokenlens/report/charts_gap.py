"""The Japanese − English gap as charts: the gap and its three parts per split, and the
per-class composition / within contributions of each decomposition (pp, with
intervals; a part the data cannot estimate has no mark).
"""

from __future__ import annotations

import altair as alt

from tokenlens.analysis.summary_figures import Estimate, Split
from tokenlens.analysis.summary_file import Summary
from tokenlens.format import finite
from tokenlens.report.chart_kit import (
    WIDTH,
    Row,
    Spec,
    first_seen,
    inline_data,
    pp_value,
)

_PARTS = ("gap", "composition", "within", "out_of_support")
_CLASS_PARTS = ("composition", "within", "out_of_support")


def gap_rows(summary: Summary) -> list[Row]:
    """The JA-EN gap and its composition / within parts per decomposition, in pp."""
    gap = summary.gap
    rows: list[Row] = []
    for figure, label in (
        (gap.overall if gap else None, "all rows (vLLM)"),
        (gap.judged if gap else None, "judged rows"),
    ):
        if figure is not None:
            rows.append(_value_row(figure, by="total", part=label))
    for by, deco in _decompositions(summary):
        for part in _PARTS:
            figure = deco.part(part)
            if figure is not None and figure.value is not None:  # not estimable: no mark
                rows.append(_value_row(figure, by=by, part=part))
    return rows


def _decompositions(summary: Summary) -> list[tuple[str, Split]]:
    """(label, split) for the confidence split of each drafter family, then the
    descriptive splits of the primary family."""
    out: list[tuple[str, Split]] = []
    for family, block in summary.families.items():
        if block.confidence is not None:
            out.append((f"confidence ({family.replace('_', '-')})", block.confidence))
    out += list(summary.gap.decomposition.items()) if summary.gap is not None else []
    return out


def _value_row(stat: Estimate, **labels: str) -> Row:
    return {
        **labels,
        "value": pp_value(stat.value),
        "ci_low": pp_value(stat.ci_low),
        "ci_high": pp_value(stat.ci_high),
        "n": int(stat.n or 0),
    }


def gap_chart(summary: Summary) -> Spec:
    """Gap and its three parts per split, with intervals (pp); not estimable parts have no mark."""
    rows = gap_rows(summary)
    parts = first_seen(r["part"] for r in rows)
    color = alt.Color("part:N", title="part", sort=parts)
    y = alt.Y("by:N", sort=first_seen(r["by"] for r in rows), title="decomposed by")
    yo = alt.YOffset("part:N", sort=parts)
    tooltip = [
        alt.Tooltip("by:N", title="decomposed by"),
        alt.Tooltip("part:N"),
        alt.Tooltip("value:Q", format="+.1f", title="pp"),
        alt.Tooltip("ci_low:Q", format="+.1f", title="95% CI low"),
        alt.Tooltip("ci_high:Q", format="+.1f", title="95% CI high"),
        alt.Tooltip("n:Q", title="judged rows"),
    ]
    base = alt.Chart(inline_data(rows))
    zero = alt.Chart(inline_data([{"zero": 0}])).mark_rule(color="#888").encode(x="zero:Q")
    ci = base.mark_rule(strokeWidth=2).encode(
        y=y, yOffset=yo, x="ci_low:Q", x2="ci_high:Q", color=color, tooltip=tooltip
    )
    points = base.mark_point(filled=True, size=70).encode(
        y=y,
        yOffset=yo,
        x=alt.X("value:Q", title="Japanese − English, percentage points"),
        color=color,
        tooltip=tooltip,
    )
    title = "Japanese − English gap and its decomposition (judged rows unless noted)"
    chart = alt.layer(zero, ci, points, title=title).properties(width=WIDTH, height=alt.Step(14))
    return chart.to_dict()


def decomposition_rows(summary: Summary) -> list[Row]:
    """Per-class composition and within contributions of every decomposition, in pp."""
    decompositions = dict(_decompositions(summary))
    return [
        {
            "by": by,
            "class": str(cls.cls),
            "part": part,
            "value": pp_value(figure.value),
            "shared": bool(cls.shared),
            "share_ja": finite(cls.share_ja),
            "share_en": finite(cls.share_en),
            "rate_ja": finite(cls.rate_ja),
            "rate_en": finite(cls.rate_en),
        }
        for by, deco in decompositions.items()
        for cls in deco.classes
        for part in _CLASS_PARTS
        if (figure := getattr(cls, part)) is not None and figure.value is not None
    ]


def decomposition_chart(summary: Summary) -> Spec:
    """Which classes carry the gap: a diverging bar per class and part, one row per split."""
    rows = decomposition_rows(summary)
    tooltip = [
        alt.Tooltip("by:N", title="decomposed by"),
        alt.Tooltip("class:N"),
        alt.Tooltip("part:N"),
        alt.Tooltip("value:Q", format="+.2f", title="pp"),
        alt.Tooltip("shared:N", title="both languages have it"),
        alt.Tooltip("share_ja:Q", format=".1%", title="share of ja rows"),
        alt.Tooltip("share_en:Q", format=".1%", title="share of en rows"),
        alt.Tooltip("rate_ja:Q", format=".3f"),
        alt.Tooltip("rate_en:Q", format=".3f"),
    ]
    bars = (
        alt.Chart(inline_data(rows))
        .mark_bar()
        .encode(
            y=alt.Y("class:N", sort=None, title=None),
            yOffset=alt.YOffset("part:N"),
            x=alt.X("value:Q", title="contribution to the gap, pp"),
            color=alt.Color("part:N", title="part"),
            tooltip=tooltip,
        )
        .properties(width=WIDTH - 60, height=alt.Step(9))
    )
    by_order = first_seen(r["by"] for r in rows)
    chart = bars.facet(
        row=alt.Row("by:N", sort=by_order, title=None, header=alt.Header(labelAngle=0)),
        title="Per-class contributions to the gap (composition: shares; within: rates; "
        "out of support)",
    )
    spec: Spec = chart.resolve_scale(y="independent").to_dict()
    return spec
