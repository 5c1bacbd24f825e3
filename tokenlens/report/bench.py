"""The bench report: ``report.html`` of a ``tokenlens bench`` directory.

One page per bench, built only from ``results.csv`` and ``bench.json`` so it can be
rewritten after every case and read on a machine without the run directories. It
shows throughput in tokens and in characters per second (the two tell different
stories across languages: a token carries ~1.5 characters of Japanese but ~4 of
English), the speedup over the matching baseline, acceptance by draft position, every
case in a table, and the Markdown of ``results.md`` to copy. Model names, corpus
names and method labels come from a plan file and are treated as untrusted text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import altair as alt

from tokenlens.bench.results_md import (
    group_label,
    groups,
    is_baseline,
    lang_of,
    method_name,
    results_markdown,
    variant_label,
    variants,
)
from tokenlens.bench_results import BENCH_JSON, RESULTS_CSV, Row, read_results, setup_label
from tokenlens.errors import TokenlensError
from tokenlens.format import MISSING, finite, lang_order, num, qty, spread
from tokenlens.report.chart_kit import WIDTH, Spec, inline_data, lang_color
from tokenlens.report.export import export_charts
from tokenlens.report.html import chart_page

REPORT = "report.html"
CHARTS_DIR = "charts"
TITLE = "tokenlens bench"
TEMPLATE = "bench.html"
# Every chart of the page, in page order; all are exported as PNG and SVG.
CHART_IDS = ("tok_s", "chars_s", "speedup", "acceptance_by_position")

# (chart id, column, axis title, chart title)
_THROUGHPUT = (
    ("tok_s", "tok_s", "output tokens / s", "Output tokens per second (median, min–max)"),
    (
        "chars_s",
        "chars_s",
        "output characters / s",
        "Output characters per second (median, min–max)",
    ),
)


def write_bench_report(bench_dir: Path, out: Path | None = None, *, export: bool = True) -> Path:
    """Write the HTML report of the bench in ``bench_dir`` (default
    ``bench_dir/report.html``) and PNG/SVG files of its charts in ``charts/`` beside
    it. Reads ``results.csv`` and, when present, ``bench.json``. Returns the path.

    ``export=False`` skips the PNG/SVG files, which take most of the few seconds this
    costs: for refreshing the page between cases of a running bench."""
    results = bench_dir / RESULTS_CSV
    if not results.is_file():
        raise TokenlensError(f"{results}: not found (run tokenlens bench first)")
    rows = read_results(results)
    bench = read_bench_json(bench_dir / BENCH_JSON)
    out = out if out is not None else bench_dir / REPORT
    out.parent.mkdir(parents=True, exist_ok=True)
    specs = bench_charts(rows)
    html = chart_page(TEMPLATE, TITLE, specs, _signatures(rows, bench), **page_context(rows, bench))
    if export:
        export_charts(specs, out.parent / CHARTS_DIR, CHART_IDS)
    out.write_text(html, "utf-8")
    return out


def read_bench_json(path: Path) -> dict[str, Any]:
    """``bench.json``, or an empty dict while it does not exist (a report of a bench
    that has not written it yet is still worth having)."""
    if not path.is_file():
        return {}
    try:
        bench = json.loads(path.read_text("utf-8"))
    except ValueError as exc:
        raise TokenlensError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(bench, dict):
        raise TokenlensError(f"{path}: not a JSON object")
    return bench


def _signatures(rows: Sequence[Row], bench: Mapping[str, Any]) -> list[str]:
    """The bench signature first, then each case's (they differ in method, k, ...)."""
    sigs = [str(bench.get("signature") or "unknown")]
    return sigs + [str(r["signature"]) for r in rows if r.get("signature")]


# --- charts ---------------------------------------------------------------------------


def case_rows(rows: Sequence[Row]) -> list[Row]:
    """One chart row per case: labels to group and colour by, and the numbers."""
    numbers = (
        "tok_s",
        "tok_s_min",
        "tok_s_max",
        "tok_s_cv",
        "chars_s",
        "chars_s_min",
        "chars_s_max",
        "acceptance_rate",
        "speedup_tok_s",
        "speedup_chars_s",
    )
    return [
        {
            "case_id": str(row.get("case_id")),
            "group": group_label(row),
            "variant": variant_label(row),
            "method": method_name(row),
            "k": int(row.get("k") or 0),
            "lang": lang_of(row),
            "baseline": is_baseline(row),
            "repeats": row.get("repeats"),
            **{name: finite(row.get(name)) for name in numbers},
        }
        for row in rows
    ]


def position_rows(rows: Sequence[Row]) -> list[Row]:
    """Unconditional acceptance per draft position (1-based), one row per case and j."""
    return [
        {
            "case_id": str(row.get("case_id")),
            "group": group_label(row),
            "variant": variant_label(row),
            "lang": lang_of(row),
            "position": j,
            "acceptance": finite(value),
        }
        for row in rows
        if not is_baseline(row)
        for j, value in enumerate(row.get("acceptance_per_position") or [], start=1)
    ]


class _Orders:
    """The sort orders every chart shares: groups and variants in plan order
    (baselines first), Japanese and English first."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.groups = [group_label(g[0]) for g in groups(rows)]
        self.variants = [variant_label(v) for v in variants(rows)]
        self.langs = lang_order(lang_of(r) for r in rows)

    def x(self) -> alt.X:
        axis = alt.Axis(labelAngle=0, labelLimit=160)
        return alt.X("variant:N", sort=self.variants, title="method", axis=axis)

    def x_offset(self) -> alt.XOffset:
        """Languages side by side, each in the same slot in every panel (a fixed domain,
        so panels without some language keep the others where they were)."""
        return alt.XOffset("lang:N", sort=self.langs, scale=alt.Scale(domain=self.langs))

    def by_group(self, chart: alt.LayerChart, title: str) -> Spec:
        """One panel per group (model, setup, corpus, length), stacked."""
        header = alt.Header(labelAngle=0, labelAnchor="start", labelFontWeight="bold")
        facet = alt.Facet("group:N", sort=self.groups, title=None, header=header)
        spec: Spec = (
            chart.facet(facet=facet, columns=1, title=title)
            # Each panel its own methods; the offset scale must follow the x scale or
            # Vega-Lite squeezes the marks into a hairline.
            .resolve_scale(x="independent", xOffset="independent")
            .to_dict()
        )
        return spec


def _case_tooltip(*extra: alt.Tooltip) -> list[alt.Tooltip]:
    return [
        alt.Tooltip("case_id:N", title="case"),
        alt.Tooltip("group:N", title="setup"),
        alt.Tooltip("variant:N", title="method"),
        alt.Tooltip("lang:N", title="language"),
        *extra,
    ]


def throughput_chart(rows: Sequence[Row], column: str, y_title: str, title: str) -> Spec:
    """Median ``column`` per case (point) with its min–max over repeats (rule),
    languages side by side within each method and k."""
    orders = _Orders(rows)
    color = lang_color(orders.langs)
    x, xo = orders.x(), orders.x_offset()
    tooltip = _case_tooltip(
        alt.Tooltip(f"{column}:Q", format=".1f", title="median"),
        alt.Tooltip(f"{column}_min:Q", format=".1f", title="min"),
        alt.Tooltip(f"{column}_max:Q", format=".1f", title="max"),
        alt.Tooltip("repeats:Q"),
        alt.Tooltip("tok_s_cv:Q", format=".1%", title="CV of tok/s"),
        alt.Tooltip("acceptance_rate:Q", format=".3f", title="acceptance"),
    )
    spread_rule = (
        alt.Chart()
        .mark_rule(strokeWidth=2)
        .encode(x=x, xOffset=xo, y=f"{column}_min:Q", y2=f"{column}_max:Q", color=color)
    )
    median = (
        alt.Chart()
        .mark_point(filled=True, size=70)
        .encode(
            x=x, xOffset=xo, y=alt.Y(f"{column}:Q", title=y_title), color=color, tooltip=tooltip
        )
    )
    layered = alt.LayerChart(data=inline_data(case_rows(rows)), layer=[spread_rule, median])
    return orders.by_group(layered.properties(width=WIDTH, height=220), title)


def speedup_rows(rows: Sequence[Row]) -> list[Row]:
    """Cases with a speedup over their baseline (the baselines themselves left out)."""
    return [r for r in case_rows(rows) if not r["baseline"] and r["speedup_tok_s"] is not None]


def speedup_chart(rows: Sequence[Row]) -> Spec:
    """tok/s over the matching baseline per method, k and language, as bars from 1×."""
    orders, data = _Orders(rows), speedup_rows(rows)
    # Only the groups and methods with a speedup get a panel and a slot.
    orders.groups = [g for g in orders.groups if g in {r["group"] for r in data}]
    orders.variants = [v for v in orders.variants if v in {r["variant"] for r in data}]
    color = lang_color(orders.langs)
    tooltip = _case_tooltip(
        alt.Tooltip("speedup_tok_s:Q", format=".2f", title="speedup, tok/s"),
        alt.Tooltip("speedup_chars_s:Q", format=".2f", title="speedup, chars/s"),
        alt.Tooltip("acceptance_rate:Q", format=".3f", title="acceptance"),
    )
    bars = (
        alt.Chart()
        .mark_bar()
        .encode(
            x=orders.x(),
            xOffset=orders.x_offset(),
            y=alt.Y("speedup_tok_s:Q", title="speedup over the baseline (tok/s, ×)"),
            y2=alt.datum(1),
            color=color,
            tooltip=tooltip,
        )
    )
    one = alt.Chart().mark_rule(color="#888", strokeDash=[4, 3]).encode(y=alt.datum(1))
    layered = alt.LayerChart(data=inline_data(data), layer=[bars, one])
    title = "Speedup over the baseline of the same model, corpus, length and language"
    return orders.by_group(layered.properties(width=WIDTH, height=200), title)


def position_chart(rows: Sequence[Row]) -> Spec:
    """Acceptance at each draft position, one panel per method and k, a line per
    language: where the drafts of each language stop being accepted. One row of panels
    per group (a grid faceted by group and method would leave holes where a group lacks
    a method, and Vega-Lite then mislabels the cells)."""
    orders = _Orders(rows)
    tooltip = _case_tooltip(
        alt.Tooltip("position:O", title="draft position"),
        alt.Tooltip("acceptance:Q", format=".3f", title="accepted / drafts"),
    )
    header = alt.Header(labelFontWeight="bold")
    panels = []
    for group in groups(rows):
        data = position_rows(group)
        if not data:
            continue
        present = {r["variant"] for r in data}
        lines = (
            alt.Chart(inline_data(data))
            .mark_line(point=alt.OverlayMarkDef(filled=True, size=50))
            .encode(
                x=alt.X("position:O", title="draft position", axis=alt.Axis(labelAngle=0)),
                y=alt.Y("acceptance:Q", title="acceptance", scale=alt.Scale(domain=[0, 1])),
                color=lang_color(orders.langs),
                tooltip=tooltip,
            )
            .properties(width=200, height=150)
        )
        facet = alt.Facet(
            "variant:N",
            sort=[v for v in orders.variants if v in present],
            title=None,
            header=header,
        )
        label = alt.TitleParams(group_label(group[0]), anchor="start", fontSize=12)
        panels.append(lines.facet(facet=facet, columns=4, title=label))
    title = "Acceptance by draft position, unconditional (accepted at j / drafts)"
    spec: Spec = alt.vconcat(*panels, title=title, spacing=24).to_dict()
    return spec


def bench_charts(rows: Sequence[Row]) -> dict[str, Spec]:
    """Every chart of the bench report by its id (also the export file name); the
    speedup and position charts only when some case has their data."""
    specs = {cid: throughput_chart(rows, col, y, t) for cid, col, y, t in _THROUGHPUT}
    if speedup_rows(rows):
        specs["speedup"] = speedup_chart(rows)
    if position_rows(rows):
        specs["acceptance_by_position"] = position_chart(rows)
    return specs


# --- page -----------------------------------------------------------------------------


def page_context(rows: Sequence[Row], bench: Mapping[str, Any]) -> dict[str, Any]:
    """What the template shows besides the charts: the plan, the facts, every case."""
    plan = bench.get("plan")
    plan = plan if isinstance(plan, Mapping) else {}
    done, total = bench.get("cases_done"), bench.get("cases_total")
    progress = f"{len(rows) if done is None else done} of {MISSING if total is None else total}"
    facts = [
        ("cases done", progress),
        ("tokenlens", bench.get("tokenlens_version")),
        ("vLLM", bench.get("vllm_version")),
        ("plan sha256", bench.get("plan_sha256")),
        ("created", bench.get("created_at")),
        ("server", bench.get("server")),
    ]
    return {
        "plan_name": plan.get("name"),
        "description": plan.get("description"),
        "facts": [(name, value) for name, value in facts if value is not None],
        "partial": (done, total)
        if done is not None and total is not None and done < total
        else None,
        "throughput_charts": [cid for cid, _, _, _ in _THROUGHPUT],
        "cases_header": [name for name, _ in _CASE_COLUMNS],
        "cases": [
            [MISSING if (value := cell(row)) is None else value for _, cell in _CASE_COLUMNS]
            for row in rows
        ],
        "results_md": results_markdown(list(rows), bench),
    }


def _range(row: Row, column: str) -> str:
    return spread(row.get(column), row.get(f"{column}_min"), row.get(f"{column}_max"), "throughput")


# (header, cell) of the cases table; numbers formatted as in results.md.
_CASE_COLUMNS: tuple[tuple[str, Callable[[Row], Any]], ...] = (
    ("case", lambda r: r.get("case_id")),
    ("model", lambda r: r.get("model")),
    ("dtype", lambda r: r.get("dtype")),
    ("quantization", lambda r: r.get("quantization")),
    ("corpus", lambda r: r.get("corpus")),
    ("length", lambda r: r.get("length")),
    ("lang", lambda r: r.get("lang")),
    ("method", lambda r: r.get("method_label")),
    ("vLLM method", lambda r: r.get("method")),
    ("k", lambda r: r.get("k")),
    ("draft model", lambda r: r.get("draft_model")),
    ("runner", setup_label),
    ("concurrency", lambda r: r.get("concurrency")),
    ("repeats", lambda r: r.get("repeats")),
    ("tok/s", lambda r: _range(r, "tok_s")),
    ("CV", lambda r: num(r.get("tok_s_cv"), "cv")),
    ("chars/s", lambda r: _range(r, "chars_s")),
    ("bytes/s", lambda r: _range(r, "bytes_s")),
    ("TTFT s", lambda r: num(r.get("ttft_s"), "seconds")),
    ("acc", lambda r: num(r.get("acceptance_rate"), "rate")),
    ("mean acc. length", lambda r: num(r.get("mean_acceptance_length"), "per_step")),
    ("speedup tok/s", lambda r: qty(r.get("speedup_tok_s"), "speedup")),
    ("speedup chars/s", lambda r: qty(r.get("speedup_chars_s"), "speedup")),
    ("speedup over", lambda r: r.get("baseline_case_id") or r.get("speedup_note")),
    ("step ms", lambda r: num(r.get("step_ms"), "ms")),
    ("drafting ms", lambda r: num(r.get("draft_ms"), "ms")),
    ("verification ms", lambda r: num(r.get("verify_ms"), "ms")),
    ("drafter cost (target steps)", lambda r: num(r.get("draft_target_steps"), "ratio")),
    ("plain tok/s", lambda r: _range(r, "plain_tok_s")),
    ("warning", lambda r: r.get("warning")),
    ("output tokens", lambda r: r.get("output_tokens")),
    ("output chars", lambda r: r.get("output_chars")),
)
