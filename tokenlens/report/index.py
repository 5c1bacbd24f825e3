"""``index.html``: the front page of a study's output directory.

``tokenlens demo`` leaves a bench, traced runs, an analysis and FINDINGS.md side by
side; this page says what is there, links each part with a relative link (the
directory can be moved or zipped whole), and repeats the headline numbers: acceptance
per language with intervals, the H1/H2 verdicts, the best measured speedup per
language, and every signature. A part that was not run, or whose file is missing or
unreadable, is shown as such instead of failing: the page is written last and must not
lose the work before it.

The page is static and fully offline. It has no script at all (its Content-Security-
Policy forbids scripts and fetches), shares the reports' CSS, comes from
``templates/index.html`` with autoescape, and formats numbers with
:mod:`tokenlens.format`, so the index and FINDINGS.md agree digit for digit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from markupsafe import Markup

from tokenlens.analysis.summary_file import parse_summary
from tokenlens.analysis.wording import runs_phrase
from tokenlens.errors import TokenlensError
from tokenlens.format import (
    HYPOTHESES,
    LANG_ORDER,
    MISSING,
    interval,
    or_missing,
    qty,
    rate_cell,
)
from tokenlens.report.analysis_page import hypotheses
from tokenlens.report.findings_speed import best_speedups
from tokenlens.report.html import render, static

INDEX = "index.html"
NOT_RUN = "not run"

# No script, no fetch: the page is text, tables and links.
POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)
TEMPLATE = "index.html"
# Anchors of the analysis report (tokenlens/report/analysis_page.py) the index links to.
TOKEN_VIEW_ID = "token-view"
REPORT_ANCHORS = (TOKEN_VIEW_ID, *(f"hyp-{key}" for key in HYPOTHESES))


@dataclass
class _Part:
    """One input read for the page: its data, or why there is none."""

    data: Any = None
    problem: str | None = None


def write_index(
    out: Path,
    bench_dir: Path | None,
    analysis_dir: Path | None,
    runs: Sequence[Path],
    findings: Path | None,
    extra_markdown: Sequence[Path] = (),
    note: str | None = None,
) -> Path:
    """Write ``out/index.html`` for the given parts (None: not run) and return its path
    (links relative to ``out``).

    ``note``: a line shown under the title (the demo's smoke-size note)."""
    out.mkdir(parents=True, exist_ok=True)
    bench = _read_bench(bench_dir)
    analysis = _read_analysis(analysis_dir)
    report = analysis_dir / "report.html" if analysis_dir is not None else None
    found = anchors(report, REPORT_ANCHORS)
    run_parts = [(run, _read_json(run / "manifest.json")) for run in runs]
    page = render(
        TEMPLATE,
        policy=POLICY,
        note=note,
        css=Markup(static("report.css") + static("index.css")),
        analysis_problem=_problem(analysis),
        bench_problem=_problem(bench),
        **_acceptance(analysis),
        hypotheses=_hypotheses(out, report, found, analysis),
        **_speed(bench),
        files=_files(
            out, bench_dir, bench, analysis_dir, analysis, found, findings, extra_markdown
        ),
        runs=_runs(out, run_parts),
        signatures=_signatures(bench, analysis, run_parts),
    )
    path = out / INDEX
    path.write_text(page, "utf-8")
    return path


# --- reading the parts --------------------------------------------------------------------


def _read_json(path: Path) -> _Part:
    if not path.is_file():
        return _Part(problem=f"{path.name} missing")
    try:
        return _Part(data=json.loads(path.read_text("utf-8")))
    except (OSError, ValueError) as exc:
        return _Part(problem=f"{path.name} unreadable: {exc}")


def _read_analysis(analysis_dir: Path | None) -> _Part:
    if analysis_dir is None:
        return _Part(problem=NOT_RUN)
    part = _read_json(analysis_dir / "summary.json")
    if part.problem is None and not isinstance(part.data, dict):
        part = _Part(problem="summary.json is not an analysis summary")
    if part.problem and not analysis_dir.is_dir():
        part.problem = NOT_RUN
    return part


def _read_bench(bench_dir: Path | None) -> _Part:
    from tokenlens.bench_results import BENCH_JSON, RESULTS_CSV, read_results

    if bench_dir is None or not bench_dir.is_dir():
        return _Part(problem=NOT_RUN)
    if not (bench_dir / RESULTS_CSV).is_file():
        return _Part(problem=f"{NOT_RUN} ({RESULTS_CSV} missing)")
    try:
        rows = read_results(bench_dir / RESULTS_CSV)
    except TokenlensError as exc:
        return _Part(problem=f"{RESULTS_CSV} unreadable: {exc}")
    info = _read_json(bench_dir / BENCH_JSON)
    return _Part(data={"rows": rows, "info": info.data if isinstance(info.data, dict) else {}})


# --- links ----------------------------------------------------------------------------------


def href(out: Path, target: Path, anchor: str = "") -> str:
    """A relative, percent-encoded link from the page in ``out`` to ``target``."""
    rel = Path(os.path.relpath(target.resolve(), out.resolve())).as_posix()
    return quote(rel, safe="/") + (f"#{quote(anchor, safe='')}" if anchor else "")


def _link(out: Path, target: Path | None, label: str, anchor: str = "") -> dict[str, Any]:
    """A link when ``target`` exists, else (href None) a note that it is missing."""
    if target is None or not target.exists():
        return {"href": None, "label": label}
    return {"href": href(out, target, anchor), "label": label}


def anchors(path: Path | None, wanted: Sequence[str]) -> set[str]:
    """Which of the ``wanted`` element ids the HTML file at ``path`` has: a link to an
    anchor the page lacks would land at its top, so only these get one."""
    if path is None or not path.is_file():
        return set()
    try:
        html = path.read_text("utf-8", errors="replace")
    except OSError:
        return set()
    return {w for w in wanted if f'id="{w}"' in html}


# --- sections -------------------------------------------------------------------------------


def _problem(part: _Part) -> dict[str, str] | None:
    """Why a part has nothing to show: ``missing`` when it was not run, else ``error``."""
    if not part.problem:
        return None
    kind = "missing" if part.problem.startswith(NOT_RUN) else "error"
    return {"kind": kind, "text": part.problem}


def _acceptance(analysis: _Part) -> dict[str, Any]:
    """Acceptance per run (vLLM's rate and the judged rate, per language: never pooled
    across runs) and the judged gap of the family the verdicts read."""
    if analysis.problem:
        return {"acceptance": [], "gap": MISSING}
    summary = parse_summary(analysis.data)
    rows = [
        [
            run.label,
            run.method,
            or_missing(run.k),
            *(rate_cell(run.acceptance.get(lang)) for lang in LANG_ORDER),
            *(rate_cell(run.acceptance_judged.get(lang)) for lang in LANG_ORDER),
        ]
        for run in summary.runs
    ]
    if not rows:  # a summary written before per-run judged rates: its languages
        rows = [
            [
                "all runs",
                MISSING,
                MISSING,
                *(rate_cell(summary.acceptance.get(lang)) for lang in LANG_ORDER),
                *(rate_cell(summary.acceptance_judged.get(lang)) for lang in LANG_ORDER),
            ]
        ]
    gap = summary.gap.judged if summary.gap is not None else None
    family = summary.families.get(str(summary.gap.family)) if summary.gap is not None else None
    label = (
        f" ({summary.gap.family.replace('_', '-')} drafters, {runs_phrase(family.configurations)})"
        if summary.gap is not None and summary.gap.family and family is not None
        else ""
    )
    return {"acceptance": rows, "gap": interval(gap, "pp") + label}


def _hypotheses(
    out: Path, report: Path | None, found: set[str], analysis: _Part
) -> list[dict[str, Any]]:
    if analysis.problem:
        return []
    parsed = parse_summary(analysis.data)
    cards = hypotheses(parsed.hypotheses, note="", every=True, level=parsed.settings.decision_level)
    for card in cards:
        anchor = f"hyp-{card['key']}"
        card["more"] = _link(out, report, "in the report", anchor) if anchor in found else None
    return cards


def _speed(bench: _Part) -> dict[str, Any]:
    if bench.problem:
        return {"plan_name": None, "plan_description": "", "speed": []}
    rows: list[Mapping[str, Any]] = bench.data["rows"]
    plan = bench.data["info"].get("plan") or {}
    speed = [
        [
            lang,
            qty(row.get("speedup_tok_s"), "speedup"),
            qty(row.get("speedup_chars_s"), "speedup"),
            row.get("method_label") or row.get("method"),
            row.get("k"),
            row.get("model"),
            row.get("corpus"),
        ]
        for lang, row in best_speedups(rows).items()
    ]
    return {
        "plan_name": plan.get("name"),
        "plan_description": plan.get("description", ""),
        "speed": speed,
    }


def _files(
    out: Path,
    bench_dir: Path | None,
    bench: _Part,
    analysis_dir: Path | None,
    analysis: _Part,
    found: set[str],
    findings: Path | None,
    extra_markdown: Sequence[Path],
) -> list[tuple[str, list[dict[str, Any]] | None]]:
    """(part, its links) per row of the files table; None: the part was not run."""
    rows: list[tuple[str, list[dict[str, Any]] | None]] = []
    if bench_dir is None or bench.problem == NOT_RUN:
        rows.append(("bench", None))
    else:
        rows.append(
            (
                "bench",
                [
                    _link(out, bench_dir / name, label)
                    for name, label in (
                        ("report.html", "report"),
                        ("results.md", "results.md"),
                        ("results.csv", "results.csv"),
                        ("bench.json", "bench.json"),
                    )
                ],
            )
        )
    if analysis_dir is None or analysis.problem == NOT_RUN:
        rows.append(("analysis", None))
    else:
        report = analysis_dir / "report.html"
        links = [_link(out, report, "report")]
        if TOKEN_VIEW_ID in found:
            links.append(_link(out, report, "token view", TOKEN_VIEW_ID))
        links += [
            _link(out, analysis_dir / "tables.md", "tables.md"),
            _link(out, analysis_dir / "summary.json", "summary.json"),
        ]
        rows.append(("analysis", links))
    rows.append(("findings", None if findings is None else [_link(out, findings, findings.name)]))
    rows += [("notes", [_link(out, extra, extra.name)]) for extra in extra_markdown]
    return rows


def _runs(out: Path, runs: Sequence[tuple[Path, _Part]]) -> list[dict[str, Any]]:
    rows = []
    for run, manifest in runs:
        data = manifest.data if isinstance(manifest.data, dict) else {}
        spec = data.get("speculative") or {}
        rows.append(
            {
                "name": run.name,
                "method": spec.get("method", MISSING),
                "k": spec.get("num_speculative_tokens", MISSING),
                "status": data.get("status", MISSING),
                "problem": manifest.problem,
                "manifest": _link(out, run / "manifest.json", "manifest.json"),
            }
        )
    return rows


def _signatures(
    bench: _Part, analysis: _Part, runs: Sequence[tuple[Path, _Part]]
) -> list[tuple[str, Any]]:
    """Every signature the parts carry: the analysis', the bench's, each run's."""
    sigs: list[tuple[str, Any]] = []
    if not analysis.problem and analysis.data.get("signature"):
        sigs.append(("analysis", analysis.data["signature"]))
    if not bench.problem and bench.data["info"].get("signature"):
        sigs.append(("bench", bench.data["info"]["signature"]))
    for run, manifest in runs:
        if isinstance(manifest.data, dict) and manifest.data.get("signature"):
            sigs.append((f"run {run.name}", manifest.data["signature"]))
    return sigs
