"""HTML reports: Altair charts, the coloured token view, one self-contained page.

``write_analyze_report(analysis_dir)`` turns the outputs of ``tokenlens analyze``
(summary.json, tokens.parquet) into ``report.html`` plus PNG/SVG charts. See
docs/reports.md.
"""

from tokenlens.report.analyze import write_analyze_report

__all__ = ["write_analyze_report"]
