"""The speed model as a chart: tokens per step against k per run and language, the
model from the measured per-position acceptance next to the i.i.d. formula
(docs/analysis.md, "Speed model").
"""

from __future__ import annotations

import altair as alt

from tokenlens.analysis.summary_file import Summary
from tokenlens.format import finite
from tokenlens.report.chart_kit import (
    Row,
    Spec,
    inline_data,
    lang_color,
    languages,
)

_SERIES = ("model (measured a_j)", "i.i.d. formula")


def speed_rows(summary: Summary) -> list[Row]:
    """Speed-model curves per run and language, and the measured tokens per step."""
    rows: list[Row] = []
    for run in summary.runs:
        label = f"{run.label} ({run.method})"
        for lang, model in run.speed_by_lang.items():
            common = {"run": label, "lang": lang}
            for point in model.per_k:
                extra = {"k": int(point.k or 0), "extrapolated": bool(point.extrapolated)}
                rows += [
                    {
                        **common,
                        **extra,
                        "metric": "tokens / step",
                        "series": "model (measured a_j)",
                        "value": finite(point.tokens_per_step),
                    },
                    {
                        **common,
                        **extra,
                        "metric": "tokens / step",
                        "series": "i.i.d. formula",
                        "value": finite(point.tokens_per_step_iid),
                    },
                    {
                        **common,
                        **extra,
                        "metric": "speedup",
                        "series": "model (measured a_j)",
                        "value": finite(point.speedup),
                    },
                ]
            rows.append(
                {
                    **common,
                    "k": int(model.traced_k or 0),
                    "extrapolated": False,
                    "metric": "tokens / step",
                    "series": "measured",
                    "value": finite(model.measured_tokens_per_step),
                }
            )
    return rows


def speed_chart(summary: Summary) -> Spec:
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
