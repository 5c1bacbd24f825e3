"""HTML reports: Altair charts, the coloured token view, one self-contained page.

Pages come from Jinja2 templates in ``templates/`` (package data) with autoescape on;
numbers are written by :mod:`tokenlens.format`.

``write_analyze_report(analysis_dir)`` turns the outputs of ``tokenlens analyze``
(summary.json, tokens.parquet) into ``report.html`` plus PNG/SVG charts, and
``write_tables(analysis_dir)`` summary.json into ``tables.md``. See docs/reports.md.
``write_bench_report(bench_dir)`` does the same for ``tokenlens bench`` (results.csv,
bench.json). FINDINGS.md, the study's answer in prose, comes from a Markdown template
beside them: :func:`tokenlens.report.findings.write_findings`.
"""

from tokenlens.report.analysis_page import write_analyze_report
from tokenlens.report.bench import write_bench_report
from tokenlens.report.tables import write_tables

__all__ = ["write_analyze_report", "write_bench_report", "write_tables"]
