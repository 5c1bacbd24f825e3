"""The analyze report: ``report.html`` next to an analysis' summary.json, tokens.parquet
and outputs.parquet.

The page is ``templates/analyze.html``; this module reads the files, builds the charts
and turns the summary into the rows and cards the template shows (every number through
:mod:`tokenlens.format`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tokenlens.analysis import rejection_rows
from tokenlens.analysis.summary_file import (
    SUMMARY,
    Summary,
    load_summary,
)
from tokenlens.analysis.summary_runs import RunSummary
from tokenlens.analysis.summary_sections import RejectionFamily
from tokenlens.analysis.summary_verdicts import Hypothesis
from tokenlens.analysis.token_classes import class_label
from tokenlens.analysis.wording import runs_phrase
from tokenlens.errors import TokenlensError
from tokenlens.format import (
    HYPOTHESES,
    LANG_ORDER,
    decision_prose,
    interval,
    num,
    qty,
    verdict_words,
)
from tokenlens.report import tokenview
from tokenlens.report.charts import POSITION_SECTIONS, RATE_SECTIONS, all_charts, scope_words
from tokenlens.report.export import export_charts
from tokenlens.report.html import chart_page
from tokenlens.report.tables import class_rows, family_words

REPORT = "report.html"
CHARTS_DIR = "charts"
TEMPLATE = "analyze.html"


def write_analyze_report(analysis_dir: Path, out: Path | None = None) -> Path:
    """Write the HTML report of the analysis in ``analysis_dir`` (default
    ``analysis_dir/report.html``) and PNG/SVG files of its main charts in ``charts/``
    beside it. The token view's texts come from ``outputs.parquet``; an analysis written
    before it existed shows the judged tokens only. Returns the report's path."""
    summary_path = analysis_dir / SUMMARY
    tokens_path = analysis_dir / "tokens.parquet"
    for path in (summary_path, tokens_path):
        if not path.is_file():
            raise TokenlensError(f"{path}: not found (run tokenlens analyze first)")
    summary = load_summary(summary_path)
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
        views=tokenview.build(events, tokenview.read_outputs(analysis_dir / "outputs.parquet")),
        hover=tokenview.hover,
    )
    export_charts(specs, out.parent / CHARTS_DIR)
    out.write_text(html, "utf-8")
    return out


def _signatures(summary: Summary) -> list[str]:
    """The analysis signature first, then each run's (they differ in method, k, ...)."""
    sigs = [summary.signature or "unknown"]
    return sigs + [r.signature for r in summary.runs if r.signature]


def page_context(summary: Summary, specs: Mapping[str, Any]) -> dict[str, Any]:
    """What the template shows besides the charts and the token view."""
    return {
        "runs": [[r.label, r.method, r.k, r.status, _checked(r)] for r in summary.runs],
        "warnings": list(summary.warnings),
        "prompts": summary.prompts,
        "min_prompts": summary.settings.min_prompts,
        "hypotheses": hypotheses(summary.hypotheses, level=summary.settings.decision_level),
        "acceptance": _acceptance_rows(summary),
        "families": _family_rows(summary),
        "position_charts": [key for key, _ in POSITION_SECTIONS if key in specs],
        "rate_charts": [key for key, _, _ in RATE_SECTIONS if key in specs],
        "scope": scope_words(summary.scope).strip(" ()"),
        "classes": _class_tables(summary),
        "rejections": _rejection_tables(summary),
        "domains": _domain_tables(summary),
        "speed": _speed_rows(summary),
    }


def _checked(run: RunSummary) -> str:
    """Whether a run's events equal vLLM's counters; replayed runs have none to check."""
    if run.replayed:
        return "replayed (counts derived from the events)"
    return "yes" if run.reconciled else "NO"


def hypotheses(
    hyps: Mapping[str, Hypothesis],
    note: str = " (Japanese − English, 95% CI)",
    every: bool = False,
    level: float | None = None,
) -> list[dict[str, Any]]:
    """The H1/H2 cards: verdict, its words, the effect with ``note`` after it, and the
    evidence; a hypothesis missing from ``hyps`` is left out unless ``every``."""
    cards = []
    for key, name in HYPOTHESES.items():
        h = hyps.get(key)
        if h is None and not every:
            continue
        h = h or Hypothesis()
        verdict = h.verdict or "inconclusive"
        cards.append(
            {
                "key": key,
                "name": name,
                "verdict": verdict,
                "words": verdict_words(verdict),
                "effect": interval(h.effect_estimate, "pp"),
                "effect_note": note,
                "decision": decision_prose(h.decision_low, h.decision_high, level),
                "evidence": h.evidence or "",
                "statement": h.statement if verdict != "insufficient_data" else "",
                "sensitivity": _sensitivity(h),
            }
        )
    return cards


def _sensitivity(h: Hypothesis) -> str:
    """The verdict's sensitivity in one sentence (FINDINGS.md's wording)."""
    from tokenlens.report.findings_verdicts import sensitivity_words

    return sensitivity_words(h)


def _acceptance_rows(summary: Summary) -> list[list[Any]]:
    """One row per run: vLLM's rate and the judged rate per language, and the gap (never
    pooled across runs: the rate depends on the method and on k)."""
    rows = []
    for run in summary.runs:
        chars = [
            interval((run.text_per_step.get(lang) or {}).get(key), "per_step")
            for key in ("accepted_chars", "accepted_bytes")
            for lang in LANG_ORDER
        ]
        rows.append(
            [
                run.label,
                run.k,
                *(interval(run.acceptance.get(lang), "rate", "rate") for lang in LANG_ORDER),
                *(interval(run.acceptance_judged.get(lang), "rate", "rate") for lang in LANG_ORDER),
                *chars,
                interval(run.gap, "pp"),
            ]
        )
    return rows


def _family_rows(summary: Summary) -> list[list[Any]]:
    return [
        [
            family_words(name),
            runs_phrase(fam.configurations),
            *(interval(fam.acceptance_judged.get(lang), "rate", "rate") for lang in LANG_ORDER),
            interval(fam.gap_judged, "pp"),
            interval(fam.gap_all, "pp"),
        ]
        for name, fam in summary.families.items()
    ]


def _class_tables(summary: Summary) -> list[dict[str, Any]]:
    if summary.classes is None:
        return []
    return [
        {
            "title": f"{family_words(name)}, {class_label(column)} ({table.comparisons} compared)",
            "rows": class_rows(table),
        }
        for name, fam in summary.classes.families.items()
        for column, table in fam.by.items()
    ]


def _rejection_tables(summary: Summary) -> dict[str, Any] | None:
    """The kinds per family and per run (:mod:`tokenlens.analysis.rejection_rows`)."""
    fams = summary.rejections
    if not fams:
        return None
    legacy = all(b.legacy for b in fams.values())
    tables: list[tuple[str, Mapping[str, RejectionFamily], Callable[[str, Any], str]]] = [
        ("family", fams, lambda name, _b: family_words(name))
    ]
    if summary.rejection_runs:
        tables.append(("run", summary.rejection_runs, rejection_rows.run_label))
    words = rejection_rows.LEGACY_DEFINITION if legacy else rejection_rows.DEFINITION
    return {
        "definition": words.replace("*", "").replace("`", ""),  # Markdown marks, on a page
        "tables": [
            {
                "header": rejection_rows.header(blocks, first),
                "rows": rejection_rows.rows(blocks, label),
            }
            for first, blocks, label in tables
        ],
    }


def _domain_tables(summary: Summary) -> list[dict[str, Any]]:
    out = []
    for name, fam in summary.domains.items():
        het = fam.heterogeneity
        note = ""
        if het is not None:
            note = (
                f"Heterogeneity: not estimable ({het.not_estimable})."
                if het.not_estimable
                else f"Heterogeneity ({het.test}): spread {qty(het.spread, 'pp').lstrip('+')} "
                f"(by chance about {qty(het.chance_spread, 'pp').lstrip('+')}), p = "
                f"{num(het.p, 'rate')}."
            )
        out.append(
            {
                "title": family_words(name),
                "rows": [
                    [
                        domain,
                        g.pairs,
                        interval(g, "pp"),
                        f"{num(g.adjusted_low, 'pp')} to {qty(g.adjusted_high, 'pp')}",
                        g.reading,
                    ]
                    for domain, g in fam.domains.items()
                ],
                "note": note,
            }
        )
    return out


def _speed_rows(summary: Summary) -> list[list[Any]]:
    rows = []
    for run in summary.runs:
        for lang, m in run.speed_by_lang.items():
            rows.append(
                [
                    run.label,
                    lang,
                    m.traced_k,
                    num(m.measured_tokens_per_step, "per_step"),
                    num(m.predicted_tokens_per_step, "per_step"),
                    num(m.iid_tokens_per_step, "per_step"),
                    num(m.draft_cost, "cost"),
                    m.recommended_k,
                    qty(m.recommended_speedup, "speedup"),
                ]
            )
    return rows
