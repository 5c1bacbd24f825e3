"""Vega-Lite chart specs (built with Altair) from the typed summary.

Each function takes a :class:`~tokenlens.analysis.summary_file.Summary` and returns a
plain Vega-Lite dict with its data inline, so the page needs no data files and tests
can check data and encodings without rendering. Rates are drawn with their
prompt-clustered 95% intervals and their row counts (a rate without its n invites
over-reading sparse classes); sparse groups (fewer rows than min_count) are hollow.
"""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt

from tokenlens.analysis.summary_figures import Rate
from tokenlens.analysis.summary_file import Scope, Summary
from tokenlens.analysis.token_classes import charted, class_entry
from tokenlens.format import finite
from tokenlens.report.chart_kit import (
    WIDTH,
    Row,
    Spec,
    first_seen,
    inline_data,
    lang_color,
    languages,
    pp_value,
    rate_rows,
)
from tokenlens.report.charts_gap import decomposition_chart, decomposition_rows, gap_chart
from tokenlens.report.charts_speed import speed_chart, speed_rows

# (summary key, title, x-axis title), from the token-class table (its charted
# breakdowns, in its order). These are the per-language sections at the top of
# summary.json: one drafter family (``scope``), the title says which.
RATE_SECTIONS: tuple[tuple[str, str, str], ...] = tuple(
    (str(c.breakdown), f"Acceptance by {c.label}", str(c.axis)) for c in charted()
)
# Per-run charts of acceptance by draft position (never pooled across runs).
POSITION_SECTIONS: tuple[tuple[str, str], ...] = (
    ("by_position", "Acceptance by draft position, per run: accepted at p / drafts at p"),
    (
        "by_position_conditional",
        "Acceptance by draft position, per run: conditional on reaching p",
    ),
)
_BYTE_LENGTH = class_entry("bytes_bucket").breakdown
FAMILY_WORDS = {"trained": "trained drafters", "training_free": "training-free drafters"}


def scope_words(scope: Scope | None) -> str:
    """`` (trained drafters: run, run ...)``: what the top-level per-language sections
    cover (summary.json ``scope``); empty for a summary without one."""
    if scope is None:
        return ""
    family = FAMILY_WORDS.get(str(scope.family), str(scope.family))
    return f" ({family}: {', '.join(scope.runs)})"


def rate_chart(summary: Summary, key: str, title: str, x_title: str) -> Spec:
    """One ``by_*`` section of the summary as rates with intervals and counts."""
    rows = rate_rows(summary.breakdown(key))
    groups = first_seen(r["group"] for r in rows)
    if key.startswith("by_position"):
        groups.sort(key=lambda g: (not g.isdigit(), int(g) if g.isdigit() else 0, g))
    if key == _BYTE_LENGTH:  # buckets "1", ..., "10-12", ">=13": by their lower bound
        groups.sort(key=lambda g: int(g.lstrip(">=").split("-")[0]))
    return _rate_spec(
        rows,
        groups,
        languages(summary),
        title + scope_words(summary.scope),
        x_title,
    )


def acceptance_chart(summary: Summary) -> Spec:
    """vLLM's acceptance rate per language and run (never pooled across runs: it depends
    on the method and on k)."""
    sources: list[tuple[str, Mapping[str, Rate]]] = [
        (f"{r.label} ({r.method}, k={r.k})", r.acceptance) for r in summary.runs
    ]
    rows = [
        dict(row, lang=row["group"], group=label)
        for label, section in sources
        for row in rate_rows({"_": section})
    ]
    groups = [label for label, _ in sources]
    title = "Acceptance rate per run (accepted / draft tokens, as vLLM counts)"
    return _rate_spec(rows, groups, languages(summary), title, "runs")


def position_rows(summary: Summary, key: str) -> list[Row]:
    """Per run, language and draft position: the rate of ``key`` (``by_position`` or
    ``by_position_conditional`` of each run) with its interval and count."""
    rows = []
    for run in summary.runs:
        section: Mapping[str, Mapping[str, Rate]] = getattr(run, key)
        for row in rate_rows(section):
            rows.append(dict(row, run=str(run.label), position=int(row["group"])))
    return rows


def position_chart(summary: Summary, key: str, title: str) -> Spec:
    """Acceptance by draft position, one panel per run (positions of runs with different
    k are different quantities)."""
    rows = position_rows(summary, key)
    langs = languages(summary)
    color = lang_color(langs)
    x = alt.X("position:O", title="draft position p")
    xo = alt.XOffset("lang:N", sort=langs)
    tooltip = [
        alt.Tooltip("run:N"),
        alt.Tooltip("lang:N", title="language"),
        alt.Tooltip("position:O"),
        alt.Tooltip("rate:Q", format=".3f"),
        alt.Tooltip("ci_low:Q", format=".3f", title="95% CI low"),
        alt.Tooltip("ci_high:Q", format=".3f", title="95% CI high"),
        alt.Tooltip("n:Q", title="steps"),
    ]
    base = alt.Chart()
    ci = base.mark_rule(strokeWidth=2).encode(
        x=x, xOffset=xo, y="ci_low:Q", y2="ci_high:Q", color=color, tooltip=tooltip
    )
    points = base.mark_point(size=50, filled=True).encode(
        x=x,
        xOffset=xo,
        y=alt.Y("rate:Q", title="acceptance rate", scale=alt.Scale(domain=[0, 1])),
        color=color,
        tooltip=tooltip,
    )
    layered = alt.layer(ci, points, data=inline_data(rows)).properties(width=150, height=160)
    runs = first_seen(r["run"] for r in rows)
    chart = layered.facet(facet=alt.Facet("run:N", sort=runs, title=None), columns=5, title=title)
    spec: Spec = chart.to_dict()
    return spec


def difference_rows(summary: Summary) -> list[Row]:
    """Japanese − English within each compared class of the declared breakdowns, per
    drafter family (summary.json ``classes``), in pp; one-language classes have no row."""
    rows: list[Row] = []
    families = summary.classes.families if summary.classes is not None else {}
    for family, block in families.items():
        for column, table in block.by.items():
            for entry in table.classes:
                d = entry.difference
                if entry.status != "compared" or d is None or finite(d.value) is None:
                    continue
                rows.append(
                    {
                        "family": FAMILY_WORDS.get(family, family),
                        "by": str(column),
                        "class": str(entry.cls),
                        "value": pp_value(d.value),
                        "ci_low": pp_value(d.ci_low),
                        "ci_high": pp_value(d.ci_high),
                        "p_holm": finite(d.p_holm),
                        "n": int(d.n or 0),
                    }
                )
    return rows


def domain_rows(summary: Summary) -> list[Row]:
    """The judged gap per domain and drafter family (summary.json ``domains``), in pp."""
    rows: list[Row] = []
    for family, block in summary.domains.items():
        for domain, g in block.domains.items():
            if finite(g.value) is None:
                continue
            rows.append(
                {
                    "family": FAMILY_WORDS.get(family, family),
                    "by": "domain",
                    "class": str(domain),
                    "value": pp_value(g.value),
                    "ci_low": pp_value(g.ci_low),
                    "ci_high": pp_value(g.ci_high),
                    "p_holm": None,
                    "n": int(g.pairs or 0),
                }
            )
    return rows


def difference_chart(rows: list[Row], title: str, facet: bool = True) -> Spec:
    """Differences in pp with 95% intervals: a point and rule per class and family, one
    panel per breakdown, a line at zero."""
    families = first_seen(r["family"] for r in rows)
    color = alt.Color("family:N", title="drafter family", sort=families)
    y = alt.Y("class:N", sort=None, title=None)
    yo = alt.YOffset("family:N", sort=families)
    tooltip = [
        alt.Tooltip("family:N"),
        alt.Tooltip("by:N", title="breakdown"),
        alt.Tooltip("class:N"),
        alt.Tooltip("value:Q", format="+.1f", title="JA − EN, pp"),
        alt.Tooltip("ci_low:Q", format="+.1f", title="95% CI low"),
        alt.Tooltip("ci_high:Q", format="+.1f", title="95% CI high"),
        alt.Tooltip("p_holm:Q", format=".3f", title="Holm p"),
        alt.Tooltip("n:Q"),
    ]
    base = alt.Chart()
    zero = base.mark_rule(color="#888").encode(x=alt.datum(0))
    ci = base.mark_rule(strokeWidth=2).encode(
        y=y, yOffset=yo, x="ci_low:Q", x2="ci_high:Q", color=color, tooltip=tooltip
    )
    points = base.mark_point(filled=True, size=60).encode(
        y=y,
        yOffset=yo,
        x=alt.X("value:Q", title="Japanese − English, percentage points"),
        color=color,
        tooltip=tooltip,
    )
    layered = alt.layer(zero, ci, points, data=inline_data(rows)).properties(
        width=WIDTH - 60, height=alt.Step(16)
    )
    if not facet:
        spec: Spec = layered.properties(title=title).to_dict()
        return spec
    chart = layered.facet(
        row=alt.Row("by:N", sort=first_seen(r["by"] for r in rows), title=None), title=title
    )
    out: Spec = chart.resolve_scale(y="independent").to_dict()
    return out


def _rate_spec(
    rows: list[Row], groups: list[str], langs: list[str], title: str, x_title: str
) -> Spec:
    """Rates per group and language with CI rules, over a strip of row counts."""
    color = lang_color(langs)
    x = alt.X("group:N", sort=groups, title=x_title, axis=alt.Axis(labelAngle=0, labelLimit=160))
    xo = alt.XOffset("lang:N", sort=langs)
    tooltip = [
        alt.Tooltip("lang:N", title="language"),
        alt.Tooltip("group:N", title="group"),
        alt.Tooltip("rate:Q", format=".3f"),
        alt.Tooltip("ci_low:Q", format=".3f", title="95% CI low"),
        alt.Tooltip("ci_high:Q", format=".3f", title="95% CI high"),
        alt.Tooltip("n:Q", title="rows"),
        alt.Tooltip("sparse:N", title="sparse (< min_count)"),
    ]
    base = alt.Chart(inline_data(rows))
    ci = base.mark_rule(strokeWidth=2).encode(
        x=x, xOffset=xo, y="ci_low:Q", y2="ci_high:Q", color=color, tooltip=tooltip
    )
    points = base.mark_point(size=70, filled=True, strokeWidth=2).encode(
        x=x,
        xOffset=xo,
        y=alt.Y("rate:Q", title="acceptance rate", scale=alt.Scale(domain=[0, 1])),
        color=color,
        fill=alt.condition("datum.sparse", alt.value("white"), color),
        tooltip=tooltip,
    )
    counts = base.mark_bar().encode(
        x=alt.X("group:N", sort=groups, axis=None),
        xOffset=xo,
        y=alt.Y("n:Q", title="rows"),
        color=color,
        tooltip=tooltip,
    )
    top = alt.layer(ci, points).properties(width=WIDTH, height=220)
    chart = alt.vconcat(top, counts.properties(width=WIDTH, height=60), title=title, spacing=4)
    return chart.to_dict()


def all_charts(summary: Summary) -> dict[str, Spec]:
    """Every chart of the analyze report, by a stable id (also the export file name)."""
    charts: dict[str, Spec] = {"acceptance": acceptance_chart(summary)}
    for key, title in POSITION_SECTIONS:
        if position_rows(summary, key):
            charts[key] = position_chart(summary, key, title)
    if difference_rows(summary):
        charts["class_gaps"] = difference_chart(
            difference_rows(summary),
            "Japanese − English within each class both languages fill, per drafter family "
            "(judged positions; Holm within each breakdown and family)",
        )
    if domain_rows(summary):
        charts["domains"] = difference_chart(
            domain_rows(summary), "Judged gap per domain, Japanese − English", facet=False
        )
    for key, title, x_title in RATE_SECTIONS:
        if summary.breakdown(key):
            charts[key] = rate_chart(summary, key, title, x_title)
    if summary.gap is not None:
        charts["gap"] = gap_chart(summary)
        if decomposition_rows(summary):
            charts["decomposition"] = decomposition_chart(summary)
    if speed_rows(summary):
        charts["speed"] = speed_chart(summary)
    return charts
