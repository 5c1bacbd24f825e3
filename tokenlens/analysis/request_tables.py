"""A study counted by every class column at once (``request-stats --by all``): where its
tables are, and how their figures become one study's.

Each table holds the same events counted by another class column, so the figures every
table gives (rates, text per step, gaps, per-run figures: sums over all classes) must be
equal to the last digit across tables; :func:`combine` checks that (tables counted from
different rows are refused, never merged) and adds what each table alone gives: its
class breakdown, the standardised gap (``n_bytes``), the rates by position
(``position``), the confidence splits, H2 contrast and verdicts (``confidence``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenlens.analysis.request_stats import BY
from tokenlens.errors import TokenlensError

SHARED = ("scope", "settings", "acceptance_per_k")
"""Top-level figures every table gives alike."""


def table_paths(source: Path) -> dict[str, Path]:
    """The tables of ``request-stats --by all`` in ``source`` (``<column>.parquet``, or
    ``<column>/``, Spark's directory of parts), by class column; empty for anything else
    (one table: a file, or one directory of parts)."""
    if not source.is_dir():
        return {}
    found = {}
    for by in BY:
        for path in (source / f"{by}.parquet", source / by):
            if path.exists():
                found[by] = path
    return found


def combine(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One study's figures from those of each table (``{class column: figures}``, in
    :data:`~tokenlens.analysis.request_stats.BY` order): the first table's, with every
    other table's own additions; raises when a figure every table gives differs."""
    columns = list(results)
    out = dict(results[columns[0]])
    out["by"] = columns
    out["breakdown"] = [r["breakdown"] for r in results.values() if r["breakdown"]]
    runs = {run["run"]: run for run in out["runs"]}
    for by in columns[1:]:
        other = results[by]
        for key in SHARED:
            _same(out[key], other[key], key, by)
        if set(other["families"]) != set(out["families"]) or set(runs) != {
            r["run"] for r in other["runs"]
        }:
            raise _differ(by, "families or runs")
        for name, family in other["families"].items():
            _merge(out["families"][name], family, f"families.{name}", by)
        for run in other["runs"]:
            _merge(runs[run["run"]], run, f"runs[{run['run']}]", by)
        if other["gap"] is not None and out["gap"] is not None:
            decomposition = other["gap"].pop("decomposition")
            _merge(out["gap"], other["gap"], "gap", by)
            out["gap"]["decomposition"].update(decomposition)
        for key in ("h2_contrast", "hypotheses"):
            if key in other:
                out[key] = other[key]
    return out


def _merge(into: dict[str, Any], other: dict[str, Any], where: str, by: str) -> None:
    """``other``'s keys added to ``into``; a key both hold must be equal."""
    for key, value in other.items():
        if key in into:
            _same(into[key], value, f"{where}.{key}", by)
        else:
            into[key] = value


def _same(a: Any, b: Any, where: str, by: str) -> None:
    if a != b:
        raise _differ(by, where)


def _differ(by: str, where: str) -> TokenlensError:
    return TokenlensError(
        f"the table by {by} gives another {where} than the others: the tables were not "
        "counted from the same rows (count them again, together: --by all)"
    )
