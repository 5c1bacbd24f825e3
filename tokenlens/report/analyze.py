"""The analyze report: ``report.html`` next to an analysis' summary.json and tokens.parquet.

The page is ``templates/analyze.html``; this module reads the files, builds the charts
and turns the summary into the rows and cards the template shows (every number through
:mod:`tokenlens.format`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tokenlens.errors import TokenlensError
from tokenlens.format import HYPOTHESES, interval, lang_order, num, qty, verdict_words
from tokenlens.report import tokenview
from tokenlens.report.charts import RATE_SECTIONS, all_charts
from tokenlens.report.export import export_charts
from tokenlens.report.html import chart_page

REPORT = "report.html"
CHARTS_DIR = "charts"
TEMPLATE = "analyze.html"


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
    html = chart_page(
        TEMPLATE,
        "tokenlens analysis",
        specs,
        _signatures(summary),
        **page_context(summary, specs),
        views=tokenview.build(events, summary.get("runs") or []),
        hover=tokenview.hover,
    )
    export_charts(specs, out.parent / CHARTS_DIR)
    out.write_text(html, "utf-8")
    return out


def _signatures(summary: Mapping[str, Any]) -> list[str]:
    """The analysis signature first, then each run's (they differ in method, k, ...)."""
    sigs = [str(summary.get("signature", "unknown"))]
    return sigs + [str(r["signature"]) for r in summary.get("runs") or [] if r.get("signature")]


def page_context(summary: Mapping[str, Any], specs: Mapping[str, Any]) -> dict[str, Any]:
    """What the template shows besides the charts and the token view."""
    return {
        "runs": [
            [
                r.get("label"),
                r.get("method"),
                r.get("k"),
                r.get("status"),
                _checked(r),
            ]
            for r in summary.get("runs") or []
        ],
        "warnings": list((summary.get("inputs") or {}).get("warnings") or []),
        "prompts": summary.get("prompts") or {},
        "min_prompts": (summary.get("settings") or {}).get("min_prompts"),
        "hypotheses": hypotheses(summary.get("hypotheses") or {}),
        "acceptance": _acceptance_rows(summary),
        "rate_charts": [key for key, _, _ in RATE_SECTIONS if key in specs],
        "speed": _speed_rows(summary),
    }


def _checked(run: Mapping[str, Any]) -> str:
    """Whether a run's events equal vLLM's counters; replayed runs have none to check."""
    if run.get("replayed"):
        return "replayed (counts derived from the events)"
    return "yes" if (run.get("reconciliation") or {}).get("matches") else "NO"


def hypotheses(
    hyps: Mapping[str, Mapping[str, Any]],
    note: str = " (Japanese − English, 95% CI)",
    every: bool = False,
) -> list[dict[str, Any]]:
    """The H1/H2 cards: verdict, its words, the effect with ``note`` after it, and the
    evidence; a hypothesis missing from ``hyps`` is left out unless ``every``."""
    cards = []
    for key, name in HYPOTHESES.items():
        h = hyps.get(key) or {}
        if not h and not every:
            continue
        verdict = str(h.get("verdict", "inconclusive"))
        effect = {
            "value": h.get("effect"),
            "ci_low": h.get("ci_low"),
            "ci_high": h.get("ci_high"),
            "not_estimable": h.get("not_estimable") if h.get("effect") is None else None,
        }
        cards.append(
            {
                "key": key,
                "name": name,
                "verdict": verdict,
                "words": verdict_words(verdict),
                "effect": interval(effect, "pp"),
                "effect_note": note,
                "evidence": h.get("evidence", ""),
            }
        )
    return cards


def _acceptance_rows(summary: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for lang in lang_order(summary.get("acceptance") or {}):
        acc = summary["acceptance"][lang]
        judged = (summary.get("acceptance_judged") or {}).get(lang) or {}
        chars = ((summary.get("text_per_step") or {}).get(lang) or {}).get("accepted_chars") or {}
        rows.append(
            [
                lang,
                interval(acc, "rate", "rate"),
                acc.get("n"),
                interval(judged, "rate", "rate"),
                interval(chars, "per_step"),
            ]
        )
    return rows


def _speed_rows(summary: Mapping[str, Any]) -> list[list[Any]]:
    rows = []
    for run in summary.get("runs") or []:
        for lang, m in ((run.get("speed") or {}).get("by_lang") or {}).items():
            rows.append(
                [
                    run.get("label"),
                    lang,
                    m.get("traced_k"),
                    num(m.get("measured_tokens_per_step"), "per_step"),
                    num(m.get("predicted_tokens_per_step"), "per_step"),
                    num(m.get("iid_tokens_per_step"), "per_step"),
                    num(m.get("draft_cost"), "cost"),
                    m.get("recommended_k"),
                    qty(m.get("recommended_speedup"), "speedup"),
                ]
            )
    return rows
