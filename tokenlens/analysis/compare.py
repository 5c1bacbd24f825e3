"""``analyze --compare FIELD``: runs that may not be pooled, analysed apart, side by side.

Runs of different target models (or weights, decoding, quantization: the pooling
fields of :mod:`tokenlens.analysis.inputs`) are two studies. Asked to compare them,
analyze checks every input once across all runs (a copy is still a copy), then runs one
complete analysis per group into ``OUT/<label>/`` (its own bootstrap, verdicts and
signature), and writes ``OUT/compare.json``, which says which runs went where and what
each group's verdicts are. Nothing is pooled across groups.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenlens.analysis.config import AnalyzeConfig
from tokenlens.analysis.inputs import PoolGroup, validate_inputs
from tokenlens.analysis.pipeline import AnalyzeResult, run_analyze
from tokenlens.format_version import ANALYSIS, stamp
from tokenlens.progress import SILENT, Progress
from tokenlens.rundir import write_json_atomic

COMPARE = "compare.json"


@dataclass(frozen=True)
class Compared:
    """One group's analysis."""

    group: PoolGroup
    result: AnalyzeResult


@dataclass(frozen=True)
class CompareResult:
    out: Path
    compare_path: Path
    groups: tuple[Compared, ...]


def run_compare(
    config: AnalyzeConfig, fields: tuple[str, ...], progress: Progress = SILENT
) -> CompareResult:
    """Analyse each group of ``config.runs`` (split by ``fields``) apart under ``config.out``."""
    # only the groups are kept: each group's analysis reads its runs again
    groups = validate_inputs(config, compare=fields).groups
    done: list[Compared] = []
    for group in groups:
        sub = replace(config, runs=group.paths, out=config.out / group.label)
        done.append(Compared(group, run_analyze(sub, progress)))
    path = config.out / COMPARE
    write_json_atomic(path, _section(fields, done))
    return CompareResult(config.out, path, tuple(done))


def _section(fields: tuple[str, ...], done: list[Compared]) -> dict[str, Any]:
    return {
        **stamp(ANALYSIS),
        "compared": list(fields),
        "note": "each group is a separate analysis (own bootstrap and verdicts); "
        "nothing is pooled across groups",
        "groups": [
            {
                "label": c.group.label,
                "values": c.group.values,
                "runs": [str(p) for p in c.group.paths],
                "summary": f"{c.group.label}/summary.json",
                "verdicts": {
                    name: h.get("verdict") for name, h in c.result.summary["hypotheses"].items()
                },
            }
            for c in done
        ],
    }
