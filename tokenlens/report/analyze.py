"""The analyze report: ``report.html`` next to an analysis' summary.json and tokens.parquet."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tokenlens.errors import TokenlensError
from tokenlens.report import tokenview
from tokenlens.report.charts import RATE_SECTIONS, all_charts, languages
from tokenlens.report.escape import text as esc
from tokenlens.report.export import export_charts
from tokenlens.report.html import chart_div, page

REPORT = "report.html"
CHARTS_DIR = "charts"
_VERDICT = {
    "supported": "supported",
    "not_supported": "not supported",
    "inconclusive": "inconclusive",
}


def write_analyze_report(analysis_dir: Path, out: Path | None = None) -> Path:
    """Write the HTML report of the analysis in ``analysis_dir`` (default
    ``analysis_dir/report.html``) and PNG/SVG files of its main charts in ``charts/``
    beside it. Request texts come from the run directories named in the summary when
    they still exist. Returns the report's path."""
    summary_path = analysis_dir / "summary.json"
    tokens_path = analysis_dir / "tokens.parquet"
    for path in (summary_path, tokens_path):
        if not path.is_file():
            raise TokenlensError(f"{path}: not found (run tokenlens analyze first)")
    try:
        summary = json.loads(summary_path.read_text("utf-8"))
    except ValueError as exc:
        raise TokenlensError(f"{summary_path}: not valid JSON ({exc})") from exc
    wanted = [c for c in tokenview.EVENT_COLUMNS if c in pq.read_schema(tokens_path).names]
    events = pq.read_table(tokens_path, columns=wanted).to_pandas()
    out = out if out is not None else analysis_dir / REPORT
    out.parent.mkdir(parents=True, exist_ok=True)
    specs = all_charts(summary)
    views = tokenview.build(events, summary.get("runs") or [])
    html = page(
        "tokenlens analysis",
        _body(summary, specs, tokenview.render(views)),
        specs,
        _signatures(summary),
    )
    export_charts(specs, out.parent / CHARTS_DIR)
    out.write_text(html, "utf-8")
    return out


def _signatures(summary: Mapping[str, Any]) -> list[str]:
    """The analysis signature first, then each run's (they differ in method, k, ...)."""
    sigs = [str(summary.get("signature", "unknown"))]
    return sigs + [str(r["signature"]) for r in summary.get("runs") or [] if r.get("signature")]


def _fmt(value: Any, scale: float = 1.0, spec: str = ".3f") -> str:
    return "–" if value is None else format(float(value) * scale, spec)


def _interval(
    stat: Mapping[str, Any], key: str = "rate", scale: float = 1.0, spec: str = ".3f"
) -> str:
    value = _fmt(stat.get(key), scale, spec)
    if stat.get("ci_low") is None or stat.get("ci_high") is None:
        return value
    return f"{value} [{_fmt(stat['ci_low'], scale, spec)}, {_fmt(stat['ci_high'], scale, spec)}]"


def _body(summary: Mapping[str, Any], specs: Mapping[str, Any], tokens_html: str) -> str:
    parts = [
        "<h1>Why does speculative decoding help Japanese less?</h1>",
        '<p class="sub">tokenlens analysis report: acceptance of draft tokens by token '
        "class, the Japanese − English gap, the two hypotheses, and the speed model.</p>",
        _runs_table(summary),
        "<h2>Hypotheses</h2>",
        _hypotheses(summary.get("hypotheses") or {}),
        "<h2>Acceptance</h2>",
        _acceptance_table(summary),
        chart_div("acceptance"),
    ]
    if "gap" in specs:
        parts += [
            "<h2>The Japanese − English gap</h2>",
            "<p>Composition: Japanese has more of the classes that are hard for any "
            "drafter. Within: the same class is harder in Japanese. The split by the "
            "target's confidence separates the hypotheses best.</p>",
            chart_div("gap"),
        ]
        if "decomposition" in specs:
            parts.append(chart_div("decomposition"))
    parts += [
        "<h2>Acceptance by token class</h2>",
        "<p>Judged positions only (every accepted draft and the first rejection of each "
        "step), each classified by the token that came out there; the unconditional "
        "position chart counts all draft tokens, as vLLM does. Hollow points: fewer rows "
        "than min_count. Bars: rows behind each rate.</p>",
    ]
    parts += [chart_div(key) for key, _, _ in RATE_SECTIONS if key in specs]
    if "speed" in specs:
        parts += ["<h2>Speed model</h2>", _speed_table(summary), chart_div("speed")]
    parts += [
        "<h2>Token view</h2>",
        '<p class="legend"><span class="t accepted">accepted draft</span>'
        '<span class="t rejected">rejected: the target\'s own token</span>'
        '<span class="t plain">bonus / not drafted</span>'
        '<label><input type="checkbox" id="show-pos" checked> draft positions</label></p>',
        "<p>Hover a token for the draft, the emitted token and the target's confidence.</p>",
        f'<div id="token-view">{tokens_html}</div>',
    ]
    return "".join(parts)


def _runs_table(summary: Mapping[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{esc(r.get('label'))}</td><td>{esc(r.get('method'))}</td>"
        f"<td>{esc(r.get('k'))}</td><td>{esc(r.get('status'))}</td>"
        f"<td>{'yes' if (r.get('reconciliation') or {}).get('matches') else 'NO'}</td></tr>"
        for r in summary.get("runs") or []
    )
    return (
        "<table><tr><th>run</th><th>method</th><th>k</th><th>status</th>"
        f"<th>events match vLLM's counters</th></tr>{rows}</table>"
    )


def _hypotheses(hyps: Mapping[str, Mapping[str, Any]]) -> str:
    cards = []
    names = {"H1": "tokenization / text structure", "H2": "training data"}
    for key in ("H1", "H2"):
        h = hyps.get(key)
        if not h:
            continue
        verdict = str(h.get("verdict", "inconclusive"))
        cards.append(
            f'<div class="hyp" id="hyp-{key}"><h3>{key}: {names[key]}</h3>'
            f'<span class="verdict {esc(verdict)}">{esc(_VERDICT.get(verdict, verdict))}</span> '
            f'<span class="effect">effect {_interval(h, "effect", 100.0, "+.1f")} pp'
            " (Japanese − English, 95% CI)</span>"
            f'<p class="evidence">{esc(h.get("evidence", ""))}</p></div>'
        )
    return f'<div class="hyps">{"".join(cards)}</div>'


def _acceptance_table(summary: Mapping[str, Any]) -> str:
    head = (
        "<tr><th>language</th><th>acceptance (all draft tokens)</th><th>draft tokens</th>"
        "<th>judged-position rate</th><th>accepted chars / step</th></tr>"
    )
    rows = []
    for lang in languages(summary):
        acc = summary["acceptance"][lang]
        judged = (summary.get("acceptance_judged") or {}).get(lang) or {}
        chars = ((summary.get("text_per_step") or {}).get(lang) or {}).get("accepted_chars") or {}
        rows.append(
            f"<tr><td>{esc(lang)}</td><td>{_interval(acc)}</td><td>{esc(acc.get('n'))}</td>"
            f"<td>{_interval(judged)}</td><td>{_interval(chars, 'value')}</td></tr>"
        )
    return f"<table>{head}{''.join(rows)}</table>"


def _speed_table(summary: Mapping[str, Any]) -> str:
    head = (
        "<tr><th>run</th><th>language</th><th>traced k</th><th>measured tokens/step</th>"
        "<th>model at traced k</th><th>i.i.d. formula</th><th>draft cost c</th>"
        "<th>recommended k</th><th>its speedup</th></tr>"
    )
    rows = []
    for run in summary.get("runs") or []:
        for lang, m in ((run.get("speed") or {}).get("by_lang") or {}).items():
            rows.append(
                f"<tr><td>{esc(run.get('label'))}</td><td>{esc(lang)}</td>"
                f"<td>{esc(m.get('traced_k'))}</td>"
                f"<td>{_fmt(m.get('measured_tokens_per_step'))}</td>"
                f"<td>{_fmt(m.get('predicted_tokens_per_step'))}</td>"
                f"<td>{_fmt(m.get('iid_tokens_per_step'))}</td>"
                f"<td>{_fmt(m.get('draft_cost'), spec='.2f')}</td>"
                f"<td>{esc(m.get('recommended_k'))}</td>"
                f"<td>{_fmt(m.get('recommended_speedup'), spec='.2f')}×</td></tr>"
            )
    return f"<table>{head}{''.join(rows)}</table>"
