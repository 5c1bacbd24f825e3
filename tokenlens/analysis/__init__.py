"""Analysis: traces -> acceptance by class with request-clustered intervals, the JA-EN
gap decomposed, H1/H2 verdicts and a speed model.

``tokenlens analyze RUN [RUN ...] --out DIR`` is :func:`run_analyze`; docs/analysis.md
defines every figure.
"""

from tokenlens.analysis.config import AnalyzeConfig
from tokenlens.analysis.join import join_run
from tokenlens.analysis.pipeline import AnalyzeResult, run_analyze
from tokenlens.analysis.summarize import summarize

__all__ = ["AnalyzeConfig", "AnalyzeResult", "join_run", "run_analyze", "summarize"]
