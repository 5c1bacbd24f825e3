"""``FINDINGS.md``: the study's answer in prose, built only from its own output files.

The HTML reports show everything; FINDINGS.md is the short text one reads first or
pastes into an issue. So that every sentence can be checked against a file, it is
generated from ``summary.json`` (``tokenlens analyze``) and, when given, the rows of
``results.csv`` and ``bench.json`` (``tokenlens bench``): nothing is recomputed here
except orderings and maxima, and the only fixed prose is the scope section (what the
embedded CPU pair can and cannot say about Qwen3.5 with MTP / D-Flash on a GPU),
which is a statement about the setup, not a measurement.

The text comes from ``templates/findings.md`` (beside the HTML pages), which holds
the headings, the fixed prose and which table goes where; the modules
``findings_runs``, ``findings_verdicts``, ``findings_gap`` and ``findings_speed`` turn
the summary into its context, every number and every piece of Markdown through
:mod:`tokenlens.format` (the one place for number formats, language order and
escaping), so a label cannot break a table or smuggle HTML into a renderer, and a
figure the data cannot support reads "not estimable (why)". :func:`write_findings` is
the one writer, for ``tokenlens demo`` and ``tokenlens analyze`` alike.

Same input, same text: no dates, stable orderings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenlens.analysis.summary_file import Summary, load_summary, parse_summary
from tokenlens.format import MISSING, code, lang_name, md, or_missing
from tokenlens.format import finite as _finite
from tokenlens.report import findings_gap, findings_runs, findings_speed, findings_verdicts
from tokenlens.report.markdown import render_markdown
from tokenlens.signature import parse_signature

FINDINGS = "FINDINGS.md"
TEMPLATE = "findings.md"


def findings_markdown(
    summary: Summary | Mapping[str, Any],
    bench_rows: Sequence[Mapping[str, Any]] | None = None,
    bench_info: Mapping[str, Any] | None = None,
    checks: Sequence[Mapping[str, Any]] | None = None,
    note: str | None = None,
) -> str:
    """The text of FINDINGS.md for an analysis ``summary`` (summary.json, parsed or
    not) and, when given, the bench's ``results.csv`` rows
    (:func:`tokenlens.bench_results.read_results`), ``bench.json``, the checks of
    replayed runs against real traces (a study's ``replay/check.json``) and a
    smoke-sized study's ``note`` (quoted under the title)."""
    s = parse_summary(summary)
    return render_markdown(TEMPLATE, **context(s, bench_rows, bench_info, checks, note))


def write_findings(
    path: Path,
    analysis_dir: Path,
    bench: Path | None = None,
    checks: Sequence[Mapping[str, Any]] | None = None,
    note: str | None = None,
) -> Path:
    """Write FINDINGS.md at ``path`` from ``analysis_dir/summary.json`` and, when
    ``bench`` is a bench output holding a results.csv (or that file, as ``analyze
    --bench`` takes it), the bench and the bench.json beside it. Returns ``path``."""
    from tokenlens.bench_results import BENCH_JSON, RESULTS_CSV, read_results

    summary = load_summary(analysis_dir)
    rows = info = None
    csv = None if bench is None else bench if bench.is_file() else bench / RESULTS_CSV
    if csv is not None and csv.is_file():
        rows = read_results(csv)
        if (csv.parent / BENCH_JSON).is_file():
            info = json.loads((csv.parent / BENCH_JSON).read_text("utf-8"))
    path.write_text(findings_markdown(summary, rows, info, checks, note), encoding="utf-8")
    return path


def context(
    s: Summary,
    bench_rows: Sequence[Mapping[str, Any]] | None,
    bench_info: Mapping[str, Any] | None,
    checks: Sequence[Mapping[str, Any]] | None,
    note: str | None,
) -> dict[str, Any]:
    """Everything ``templates/findings.md`` prints, as Markdown."""
    return {
        "note": note,
        "intro": _intro(s, bench_rows),
        "short": {
            "acceptance": findings_runs.short_acceptance(s),
            "gaps": findings_gap.short_gaps(s),
            "rejections": findings_gap.short_rejections(s),
            "domains": findings_gap.short_domains(s),
            "speedups": findings_speed.short_speedups(bench_rows),
        },
        "measured": findings_runs.measured(s, checks),
        "verdicts": findings_verdicts.verdicts(s),
        "positions": findings_runs.positions(s),
        "text_per_step": findings_runs.text_per_step(s),
        "byte_length": findings_runs.byte_length(s),
        "acceptance": findings_runs.acceptance(s),
        "gap": findings_gap.gap(s),
        "classes": findings_gap.classes(s),
        "per_language": findings_gap.per_language(s),
        "declared": fmt_declared(s),
        "explore": findings_gap.explore(s),
        "rejections": findings_gap.rejections(s),
        "domains": findings_gap.domains(s),
        "domain_source": md(s.domain_source),
        "bench": findings_speed.bench(bench_rows, bench_info),
        "speed_model": findings_speed.speed_model(s),
        "scope": _scope(s),
        "signatures": _signatures(s, bench_rows, bench_info),
    }


def fmt_declared(s: Summary) -> str:
    """When the families of comparisons were declared (summary.json ``classes.declared``;
    "" for a summary written before it said)."""
    text = s.classes.declared if s.classes is not None else None
    return md(text) if text is not None else ""


def _intro(s: Summary, bench_rows: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """Where the numbers come from, how the intervals were made, the warnings and the
    prompts per language."""
    settings = s.settings
    level = _finite(settings.level)
    return {
        "bench": bench_rows is not None,
        "level": f"{level:.0%}" if level is not None else "95%",
        "interval": md(settings.interval or "t"),
        "cluster": md(settings.cluster or "prompts"),
        "bootstrap": md(or_missing(settings.bootstrap)),
        "seed": md(or_missing(settings.seed)),
        "warnings": [md(w) for w in s.warnings],
        "prompts": ", ".join(f"{md(n)} {lang_name(lang)}" for lang, n in s.prompts.items()),
        "min_prompts": md(or_missing(settings.min_prompts)),
    }


def _scope(s: Summary) -> dict[str, Any]:
    """Which fixed scope prose applies: the embedded pair's (by the signature's target)
    or the general one, greedy or sampled decoding, and the accelerators the runs ran on
    ("" when every run ran on the CPU or did not record its device)."""
    from tokenlens.models.embedded import TARGET

    sig = parse_signature(s.signature or "")
    accelerators = sorted({r.device for r in s.runs if r.device and r.device != "CPU"})
    return {
        "embedded": sig.get("model", "").split("@")[0] == TARGET.key,
        "greedy": sig.get("sampling", "").startswith("greedy"),
        "accelerators": md(", ".join(accelerators)),
    }


def _signatures(
    s: Summary,
    bench_rows: Sequence[Mapping[str, Any]] | None,
    bench_info: Mapping[str, Any] | None,
) -> dict[str, Any]:
    return {
        "analysis": code(s.signature or MISSING),
        "runs": [(code(run.label), code(run.signature)) for run in s.runs if run.signature],
        "bench": None
        if bench_rows is None
        else code((bench_info or {}).get("signature") or MISSING),
    }
