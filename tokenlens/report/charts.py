"""Vega-Lite chart specs (built with Altair) from an analysis ``summary.json``.

Each function takes the parsed summary and returns a plain Vega-Lite dict with its
data inline, so the page needs no data files and the tests can check data values and
encodings without rendering. Rates are shown with their request-clustered 95%
intervals (a rule from ci_low to ci_high) and their row counts (a bar strip under the
rates), because a rate without its n invites over-reading sparse classes; sparse
groups (fewer rows than min_count) are drawn hollow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import altair as alt

from tokenlens.format import finite, lang_order

Spec = dict[str, Any]
Row = dict[str, Any]

# Fixed colours so Japanese and English look the same in every chart of the page.
_LANG_COLOURS = ("#e45756", "#4c78a8", "#54a24b", "#b279a2", "#f58518", "#72b7b2")
WIDTH = 520

# (summary key, title, x-axis title); the order is the order on the page. These are the
# per-language sections at the top of summary.json: one drafter family (``scope``), the
# title says which.
RATE_SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("by_script", "Acceptance by script", "script of the emitted token"),
    ("by_pos", "Acceptance by part of speech", "part of speech (UniDic pos1 / word class)"),
    ("by_particle", "Acceptance by particle type", "particle type"),
    ("by_boundary", "Acceptance by boundary relation", "token against morpheme boundaries"),
    ("by_bpe_rank", "Acceptance by BPE rank", "BPE rank of the emitted token"),
    ("by_confidence", "Acceptance by the target's confidence", "target top-1 probability"),
)
# Per-run charts of acceptance by draft position (never pooled across runs).
POSITION_SECTIONS: tuple[tuple[str, str], ...] = (
    ("by_position", "Acceptance by draft position, per run: accepted at p / drafts at p"),
    (
        "by_position_conditional",
        "Acceptance by draft position, per run: conditional on reaching p",
    ),
)
FAMILY_WORDS = {"trained": "trained drafters", "training_free": "training-free drafters"}


def inline_data(rows: list[Row]) -> alt.Data:
    """Inline rows (Altair's Data constructor is untyped)."""
    return alt.Data(values=rows)  # type: ignore[no-untyped-call]


def _pp(value: Any) -> float | None:
    """A difference of rates in percentage points (JSON has no NaN, and Vega-Lite drops
    nulls from scales: :func:`~tokenlens.format.finite`)."""
    number = finite(value)
    return None if number is None else 100.0 * number


def languages(summary: Mapping[str, Any]) -> list[str]:
    """Languages of the analysis, Japanese and English first (the comparison studied)."""
    return lang_order(summary.get("acceptance") or {})


def lang_color(langs: list[str]) -> alt.Color:
    """Colour by ``lang`` with a fixed palette over ``langs`` (in that order), so a
    language has the same colour in every chart of a page."""
    colours = [_LANG_COLOURS[i % len(_LANG_COLOURS)] for i in range(len(langs))]
    return alt.Color("lang:N", title="language", scale=alt.Scale(domain=langs, range=colours))


def rate_rows(section: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[Row]:
    """Flatten ``{lang: {group: stats}}`` into one row per (lang, group)."""
    return [
        {
            "lang": lang,
            "group": str(group),
            "rate": finite(stats.get("rate")),
            "ci_low": finite(stats.get("ci_low")),
            "ci_high": finite(stats.get("ci_high")),
            "n": int(stats.get("n") or 0),
            "sparse": bool(stats.get("sparse", False)),
        }
        for lang, groups in section.items()
        for group, stats in groups.items()
    ]


def first_seen(values: Iterable[str]) -> list[str]:
    """Distinct values in first-seen order: the analysis writes buckets in scale order,
    a bench its cases in plan order."""
    return list(dict.fromkeys(values))


def scope_words(summary: Mapping[str, Any]) -> str:
    """`` (trained drafters, judged positions, runs ...)``: what the top-level per-language
    sections cover (summary.json ``scope``); empty for a summary without one."""
    scope = summary.get("scope") or {}
    if not scope:
        return ""
    family = FAMILY_WORDS.get(str(scope.get("family")), str(scope.get("family")))
    runs = ", ".join(str(r) for r in scope.get("runs") or [])
    return f" ({family}: {runs})"


def rate_chart(summary: Mapping[str, Any], key: str, title: str, x_title: str) -> Spec:
    """One ``by_*`` section of the summary as rates with intervals and counts."""
    rows = rate_rows(summary.get(key) or {})
    groups = first_seen(r["group"] for r in rows)
    if key.startswith("by_position"):
        groups.sort(key=lambda g: (not g.isdigit(), int(g) if g.isdigit() else 0, g))
    return _rate_spec(rows, groups, languages(summary), title + scope_words(summary), x_title)


def acceptance_chart(summary: Mapping[str, Any]) -> Spec:
    """vLLM's acceptance rate per language and run (never pooled across runs: it depends
    on the method and on k)."""
    runs = summary.get("runs") or []
    sources: list[tuple[str, Mapping[str, Any]]] = [
        (f"{r['label']} ({r['method']}, k={r['k']})", r.get("acceptance") or {}) for r in runs
    ]
    rows = [
        dict(row, lang=row["group"], group=label)
        for label, section in sources
        for row in rate_rows({"_": section})
    ]
    groups = [label for label, _ in sources]
    title = "Acceptance rate per run (accepted / draft tokens, as vLLM counts)"
    return _rate_spec(rows, groups, languages(summary), title, "runs")


def position_rows(summary: Mapping[str, Any], key: str) -> list[Row]:
    """Per run, language and draft position: the rate of ``key`` (``by_position`` or
    ``by_position_conditional`` of each run) with its interval and count."""
    rows = []
    for run in summary.get("runs") or []:
        for row in rate_rows(run.get(key) or {}):
            rows.append(dict(row, run=str(run.get("label")), position=int(row["group"])))
    return rows


def position_chart(summary: Mapping[str, Any], key: str, title: str) -> Spec:
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


def difference_rows(summary: Mapping[str, Any]) -> list[Row]:
    """Japanese − English within each compared class of the declared breakdowns, per
    drafter family (summary.json ``classes``), in pp; one-language classes have no row."""
    rows: list[Row] = []
    families = ((summary.get("classes") or {}).get("families")) or {}
    for family, block in families.items():
        for column, table in (block.get("by") or {}).items():
            for entry in table.get("classes") or []:
                d = entry.get("difference") or {}
                if entry.get("status") != "compared" or finite(d.get("value")) is None:
                    continue
                rows.append(
                    {
                        "family": FAMILY_WORDS.get(family, family),
                        "by": str(column),
                        "class": str(entry.get("class")),
                        "value": _pp(d.get("value")),
                        "ci_low": _pp(d.get("ci_low")),
                        "ci_high": _pp(d.get("ci_high")),
                        "p_holm": finite(d.get("p_holm")),
                        "n": int(d.get("n") or 0),
                    }
                )
    return rows


def domain_rows(summary: Mapping[str, Any]) -> list[Row]:
    """The judged gap per domain and drafter family (summary.json ``domains``), in pp."""
    rows: list[Row] = []
    families = ((summary.get("domains") or {}).get("families")) or {}
    for family, block in families.items():
        for domain, g in (block.get("domains") or {}).items():
            if finite(g.get("value")) is None:
                continue
            rows.append(
                {
                    "family": FAMILY_WORDS.get(family, family),
                    "by": "domain",
                    "class": str(domain),
                    "value": _pp(g.get("value")),
                    "ci_low": _pp(g.get("ci_low")),
                    "ci_high": _pp(g.get("ci_high")),
                    "p_holm": None,
                    "n": int(g.get("pairs") or 0),
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


_PARTS = ("gap", "composition", "within", "out_of_support")
_CLASS_PARTS = ("composition", "within", "out_of_support")


def gap_rows(summary: Mapping[str, Any]) -> list[Row]:
    """The JA-EN gap and its composition / within parts per decomposition, in pp."""
    gap = summary.get("gap") or {}
    rows: list[Row] = []
    for key, label in (("overall", "all rows (vLLM)"), ("judged", "judged rows")):
        if gap.get(key):
            rows.append(_value_row(gap[key], by="total", part=label))
    for by, deco in _decompositions(summary):
        rows += [
            _value_row(deco[part], by=by, part=part)
            for part in _PARTS
            if (deco.get(part) or {}).get("value") is not None  # not estimable: no mark
        ]
    return rows


def _decompositions(summary: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(label, split) for the confidence split of each drafter family, then the
    descriptive splits of the primary family."""
    out: list[tuple[str, Mapping[str, Any]]] = []
    for family, block in (summary.get("families") or {}).items():
        if (block or {}).get("confidence"):
            out.append((f"confidence ({family.replace('_', '-')})", block["confidence"]))
    out += list(((summary.get("gap") or {}).get("decomposition") or {}).items())
    return out


def _value_row(stat: Mapping[str, Any], **labels: str) -> Row:
    return {
        **labels,
        "value": _pp(stat.get("value")),
        "ci_low": _pp(stat.get("ci_low")),
        "ci_high": _pp(stat.get("ci_high")),
        "n": int(stat.get("n") or 0),
    }


def gap_chart(summary: Mapping[str, Any]) -> Spec:
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


def decomposition_rows(summary: Mapping[str, Any]) -> list[Row]:
    """Per-class composition and within contributions of every decomposition, in pp."""
    decompositions = dict(_decompositions(summary))
    return [
        {
            "by": by,
            "class": str(cls["class"]),
            "part": part,
            "value": _pp((cls.get(part) or {}).get("value")),
            "shared": bool(cls.get("shared")),
            "share_ja": finite(cls.get("share_ja")),
            "share_en": finite(cls.get("share_en")),
            "rate_ja": finite(cls.get("rate_ja")),
            "rate_en": finite(cls.get("rate_en")),
        }
        for by, deco in decompositions.items()
        for cls in deco.get("classes") or []
        for part in _CLASS_PARTS
        if (cls.get(part) or {}).get("value") is not None
    ]


def decomposition_chart(summary: Mapping[str, Any]) -> Spec:
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


_SERIES = ("model (measured a_j)", "i.i.d. formula")


def speed_rows(summary: Mapping[str, Any]) -> list[Row]:
    """Speed-model curves per run and language, and the measured tokens per step."""
    rows: list[Row] = []
    for run in summary.get("runs") or []:
        label = f"{run['label']} ({run['method']})"
        for lang, model in ((run.get("speed") or {}).get("by_lang") or {}).items():
            common = {"run": label, "lang": lang}
            for point in model.get("per_k") or []:
                extra = {"k": int(point["k"]), "extrapolated": bool(point.get("extrapolated"))}
                rows += [
                    {
                        **common,
                        **extra,
                        "metric": "tokens / step",
                        "series": "model (measured a_j)",
                        "value": finite(point.get("tokens_per_step")),
                    },
                    {
                        **common,
                        **extra,
                        "metric": "tokens / step",
                        "series": "i.i.d. formula",
                        "value": finite(point.get("tokens_per_step_iid")),
                    },
                    {
                        **common,
                        **extra,
                        "metric": "speedup",
                        "series": "model (measured a_j)",
                        "value": finite(point.get("speedup")),
                    },
                ]
            rows.append(
                {
                    **common,
                    "k": int(model.get("traced_k") or 0),
                    "extrapolated": False,
                    "metric": "tokens / step",
                    "series": "measured",
                    "value": finite(model.get("measured_tokens_per_step")),
                }
            )
    return rows


def speed_chart(summary: Mapping[str, Any]) -> Spec:
    """Predicted tokens/step and speedup against k, with the measured point at traced k."""
    rows = speed_rows(summary)
    color = lang_color(languages(summary))
    tooltip = [
        alt.Tooltip("run:N"),
        alt.Tooltip("lang:N", title="language"),
        alt.Tooltip("k:Q"),
        alt.Tooltip("series:N"),
        alt.Tooltip("value:Q", format=".3f"),
        alt.Tooltip("extrapolated:N"),
    ]
    x = alt.X("k:Q", title="num_speculative_tokens k", axis=alt.Axis(tickMinStep=1))
    y = alt.Y("value:Q", title=None, scale=alt.Scale(zero=False))
    lines = (
        alt.Chart()
        .transform_filter("datum.series !== 'measured'")
        .mark_line(point=True)
        .encode(
            x=x,
            y=y,
            color=color,
            strokeDash=alt.StrokeDash(
                "series:N",
                title="series",
                scale=alt.Scale(domain=list(_SERIES), range=[[1, 0], [5, 4]]),
            ),
            detail="series:N",
            tooltip=tooltip,
        )
    )
    measured = (
        alt.Chart()
        .transform_filter("datum.series === 'measured'")
        .mark_point(shape="diamond", size=160, filled=True, stroke="black", strokeWidth=1)
        .encode(x=x, y=y, color=color, tooltip=tooltip)
    )
    layered = alt.layer(lines, measured, data=inline_data(rows)).properties(width=260, height=170)
    chart = layered.facet(
        row=alt.Row("metric:N", title=None, sort=["tokens / step", "speedup"]),
        column=alt.Column("run:N", title=None),
        title="Speed model: prediction vs measurement (diamond: measured at the traced k)",
    )
    spec: Spec = chart.resolve_scale(y="independent").to_dict()
    return spec


def all_charts(summary: Mapping[str, Any]) -> dict[str, Spec]:
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
        if summary.get(key):
            charts[key] = rate_chart(summary, key, title, x_title)
    if summary.get("gap"):
        charts["gap"] = gap_chart(summary)
        if decomposition_rows(summary):
            charts["decomposition"] = decomposition_chart(summary)
    if speed_rows(summary):
        charts["speed"] = speed_chart(summary)
    return charts
