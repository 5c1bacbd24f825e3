"""``index.html``: the front page of a study's output directory.

``tokenlens demo`` leaves a bench, traced runs, an analysis and FINDINGS.md side by
side; this page says what is there, links each part with a relative link (the
directory can be moved or zipped whole), and repeats the headline numbers: acceptance
per language with intervals, the H1/H2 verdicts, the best measured speedup per
language, and every signature. A part that was not run, or whose file is missing or
unreadable, is shown as such instead of failing: the page is written last and must not
lose the work before it.

The page is static and fully offline. It has no script at all (its Content-Security-
Policy forbids scripts and fetches), shares the reports' CSS, escapes every text with
:func:`tokenlens.report.escape.text` and formats numbers with
:mod:`tokenlens.report.findings`, so the index and FINDINGS.md agree digit for digit.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tokenlens.errors import TokenlensError
from tokenlens.report.assets import CSS
from tokenlens.report.escape import text as esc
from tokenlens.report.findings import (
    HYPOTHESES,
    MISSING,
    VERDICT_WORDS,
    best_speedups,
    interval,
    languages,
    qty,
    rate_cell,
)

INDEX = "index.html"
NOT_RUN = "not run"

# No script, no fetch: the page is text, tables and links.
POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)
INDEX_CSS = """\
.missing { color: #b26a00; font-style: italic; }
.error { color: #c62828; }
.files td:first-child { white-space: nowrap; }
"""
# Anchors of the analysis report (tokenlens/report/analyze.py) the index links to.
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
) -> Path:
    """Write ``out/index.html`` for the given parts (None: not run) and return its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / INDEX
    path.write_text(
        index_html(out, bench_dir, analysis_dir, runs, findings, extra_markdown), "utf-8"
    )
    return path


def index_html(
    out: Path,
    bench_dir: Path | None,
    analysis_dir: Path | None,
    runs: Sequence[Path],
    findings: Path | None,
    extra_markdown: Sequence[Path] = (),
) -> str:
    """The page's text (links relative to ``out``)."""
    bench = _read_bench(bench_dir)
    analysis = _read_analysis(analysis_dir)
    report = analysis_dir / "report.html" if analysis_dir is not None else None
    found = anchors(report, REPORT_ANCHORS)
    run_parts = [(run, _read_json(run / "manifest.json")) for run in runs]
    body = [
        "<h1>tokenlens study</h1>",
        '<p class="sub">What this study wrote and its headline numbers. Links are '
        "relative: keep the directory together.</p>",
        "<h2>Acceptance per language</h2>",
        _acceptance(analysis),
        "<h2>Hypotheses</h2>",
        _hypotheses(out, report, found, analysis),
        "<h2>Measured speed</h2>",
        _speed(bench),
        "<h2>Reports and files</h2>",
        _files(out, bench_dir, bench, analysis_dir, analysis, found, findings, extra_markdown),
        "<h2>Runs</h2>",
        _runs(out, run_parts),
    ]
    signatures = _signatures(bench, analysis, run_parts)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(POLICY)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>tokenlens study</title><style>{CSS}{INDEX_CSS}</style></head><body>"
        f"{''.join(body)}<footer>{signatures}</footer></body></html>\n"
    )


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
    from tokenlens.bench.results import BENCH_JSON, RESULTS_CSV, read_results

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


def _link(out: Path, target: Path | None, label: str, anchor: str = "") -> str:
    """A link when ``target`` exists, else a note that it is missing."""
    if target is None or not target.exists():
        return f'<span class="missing">{esc(label)}: missing</span>'
    return f'<a href="{esc(href(out, target, anchor))}">{esc(label)}</a>'


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


def _problem(part: _Part, what: str) -> str:
    kind = "missing" if part.problem and part.problem.startswith(NOT_RUN) else "error"
    return f'<p class="{kind}">{esc(what)}: {esc(part.problem)}</p>'


def _acceptance(analysis: _Part) -> str:
    if analysis.problem:
        return _problem(analysis, "analysis")
    summary: Mapping[str, Any] = analysis.data
    acc = summary.get("acceptance") or {}
    judged = summary.get("acceptance_judged") or {}
    rows = "".join(
        f"<tr><td>{esc(lang)}</td><td>{esc(rate_cell(acc[lang]))}</td>"
        f"<td>{esc(acc[lang].get('n', MISSING))}</td>"
        f"<td>{esc(acc[lang].get('requests', MISSING))}</td>"
        f"<td>{esc(rate_cell(judged.get(lang)))}</td></tr>"
        for lang in languages(acc)
    )
    gap = interval((summary.get("gap") or {}).get("judged"), "pp")
    return (
        "<table><tr><th>language</th><th>acceptance (all draft tokens) [95% CI]</th>"
        "<th>draft tokens</th><th>requests</th><th>judged-position rate [95% CI]</th></tr>"
        f"{rows}</table>"
        f"<p>Japanese − English, judged positions: {esc(gap)}. "
        "<code>*</code> fewer rows than min_count.</p>"
    )


def _hypotheses(out: Path, report: Path | None, found: set[str], analysis: _Part) -> str:
    if analysis.problem:
        return _problem(analysis, "analysis")
    hyps = analysis.data.get("hypotheses") or {}
    cards = []
    for key, name in HYPOTHESES.items():
        h = hyps.get(key) or {}
        verdict = str(h.get("verdict", "inconclusive"))
        effect = {"value": h.get("effect"), "ci_low": h.get("ci_low"), "ci_high": h.get("ci_high")}
        more = ""
        if f"hyp-{key}" in found:
            more = f" {_link(out, report, 'in the report', f'hyp-{key}')}"
        cards.append(
            f'<div class="hyp"><h3>{esc(key)}: {esc(name)}</h3>'
            f'<span class="verdict {esc(verdict)}">{esc(VERDICT_WORDS.get(verdict, verdict))}'
            f'</span> <span class="effect">effect {esc(interval(effect, "pp"))}</span>'
            f'<p class="evidence">{esc(h.get("evidence", ""))}{more}</p></div>'
        )
    return f'<div class="hyps">{"".join(cards)}</div>'


def _speed(bench: _Part) -> str:
    if bench.problem:
        return _problem(bench, "bench")
    rows: list[Mapping[str, Any]] = bench.data["rows"]
    best = best_speedups(rows)
    plan = bench.data["info"].get("plan") or {}
    head = ""
    if plan.get("name"):
        head = f"<p>Plan <code>{esc(plan['name'])}</code>: {esc(plan.get('description', ''))}</p>"
    if not best:
        return head + '<p class="missing">no speculative case with a baseline to compare</p>'
    cells = "".join(
        f"<tr><td>{esc(lang)}</td><td>{esc(qty(row.get('speedup_tok_s'), 'speedup'))}</td>"
        f"<td>{esc(qty(row.get('speedup_chars_s'), 'speedup'))}</td>"
        f"<td>{esc(row.get('method_label') or row.get('method'))}</td>"
        f"<td>{esc(row.get('k'))}</td><td>{esc(row.get('model'))}</td>"
        f"<td>{esc(row.get('corpus'))}</td></tr>"
        for lang, row in best.items()
    )
    return (
        f"{head}<p>The best speculative case per language, by tok/s speedup over the "
        "baseline of the same model and language.</p>"
        "<table><tr><th>language</th><th>speedup (tok/s)</th><th>speedup (chars/s)</th>"
        "<th>method</th><th>k</th><th>model</th><th>corpus</th></tr>"
        f"{cells}</table>"
    )


def _files(
    out: Path,
    bench_dir: Path | None,
    bench: _Part,
    analysis_dir: Path | None,
    analysis: _Part,
    found: set[str],
    findings: Path | None,
    extra_markdown: Sequence[Path],
) -> str:
    rows: list[tuple[str, str]] = []
    if bench_dir is None or bench.problem == NOT_RUN:
        rows.append(("bench", f'<span class="missing">{NOT_RUN}</span>'))
    else:
        links = [
            _link(out, bench_dir / name, label)
            for name, label in (
                ("report.html", "report"),
                ("results.md", "results.md"),
                ("results.csv", "results.csv"),
                ("bench.json", "bench.json"),
            )
        ]
        rows.append(("bench", " · ".join(links)))
    if analysis_dir is None or analysis.problem == NOT_RUN:
        rows.append(("analysis", f'<span class="missing">{NOT_RUN}</span>'))
    else:
        report = analysis_dir / "report.html"
        links = [_link(out, report, "report")]
        if TOKEN_VIEW_ID in found:
            links.append(_link(out, report, "token view", TOKEN_VIEW_ID))
        links += [
            _link(out, analysis_dir / "tables.md", "tables.md"),
            _link(out, analysis_dir / "summary.json", "summary.json"),
        ]
        rows.append(("analysis", " · ".join(links)))
    if findings is None:
        rows.append(("findings", f'<span class="missing">{NOT_RUN}</span>'))
    else:
        rows.append(("findings", _link(out, findings, findings.name)))
    for extra in extra_markdown:
        rows.append(("notes", _link(out, extra, extra.name)))
    cells = "".join(f"<tr><td>{esc(what)}</td><td>{links}</td></tr>" for what, links in rows)
    return f'<table class="files">{cells}</table>'


def _runs(out: Path, runs: Sequence[tuple[Path, _Part]]) -> str:
    if not runs:
        return f'<p class="missing">{NOT_RUN}</p>'
    rows = []
    for run, manifest in runs:
        data = manifest.data if isinstance(manifest.data, dict) else {}
        spec = data.get("speculative") or {}
        status = (
            esc(data.get("status", MISSING)) if not manifest.problem else _problem_span(manifest)
        )
        rows.append(
            f"<tr><td>{esc(run.name)}</td><td>{esc(spec.get('method', MISSING))}</td>"
            f"<td>{esc(spec.get('num_speculative_tokens', MISSING))}</td><td>{status}</td>"
            f"<td>{_link(out, run / 'manifest.json', 'manifest.json')}</td></tr>"
        )
    return (
        "<table><tr><th>run</th><th>method</th><th>k</th><th>status</th><th>manifest</th></tr>"
        f"{''.join(rows)}</table>"
    )


def _problem_span(part: _Part) -> str:
    return f'<span class="error">{esc(part.problem)}</span>'


def _signatures(bench: _Part, analysis: _Part, runs: Sequence[tuple[Path, _Part]]) -> str:
    """Every signature the parts carry: the analysis', the bench's, each run's."""
    sigs: list[tuple[str, Any]] = []
    if not analysis.problem and analysis.data.get("signature"):
        sigs.append(("analysis", analysis.data["signature"]))
    if not bench.problem and bench.data["info"].get("signature"):
        sigs.append(("bench", bench.data["info"]["signature"]))
    for run, manifest in runs:
        if isinstance(manifest.data, dict) and manifest.data.get("signature"):
            sigs.append((f"run {run.name}", manifest.data["signature"]))
    return "".join(f"<p>{esc(what)} signature: <code>{esc(sig)}</code></p>" for what, sig in sigs)
