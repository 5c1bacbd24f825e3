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
from tokenlens.analysis.token_classes import TOKEN_CLASSES
from tokenlens.errors import TokenlensError

BY_LENGTH = next(c.breakdown for c in TOKEN_CLASSES if c.column == "bytes_bucket")
"""The breakdown summary.json also holds under ``byte_length``, per family."""

SHARED = ("scope", "settings", "acceptance_per_k", "margin_in_speed")
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
        if (other["gap"] is None) != (out["gap"] is None):
            raise _differ(by, "gap")
        if other["gap"] is not None:
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


def differences(got: dict[str, Any], summary: dict[str, Any]) -> list[str]:
    """Where ``request-figures``' ``got`` differs from ``summary.json`` of the same runs
    and settings (empty: every figure ``got`` holds equals the analysis', to the last
    digit), as paths such as ``families.trained.gap_judged``. Compared: the scope
    family's rates, text per step and breakdowns with the top level; every family's
    figures with ``families`` (the breakdown by byte length with ``byte_length``); the
    gap section; ``acceptance_per_k``, ``margin_in_speed``, ``h2_contrast`` and
    ``hypotheses``; every run's figures with ``runs[]``."""
    out = []

    def check(where: str, mine: Any, theirs: Any) -> None:
        if mine != theirs:
            out.append(where)

    scope = got["scope"]
    for key, value in got["families"][scope].items():
        if key in ("acceptance", "acceptance_judged", "text_per_step") or key.startswith("by_"):
            check(key, value, summary.get(key))
    for name, family in got["families"].items():
        for key, value in family.items():
            if key == BY_LENGTH:
                check(f"byte_length.{name}.rates", value, summary["byte_length"][name]["rates"])
            elif not key.startswith("by_") and key != "text_per_step":
                check(f"families.{name}.{key}", value, summary["families"][name].get(key))
    if got["gap"] is not None:
        for key, value in got["gap"].items():
            if key == "decomposition":
                for column, split in value.items():
                    theirs = summary["gap"]["decomposition"].get(column)
                    check(f"gap.decomposition.{column}", split, theirs)
            else:
                check(f"gap.{key}", value, summary["gap"].get(key))
    for key in ("acceptance_per_k", "margin_in_speed", "h2_contrast", "hypotheses"):
        if key in got:
            theirs = summary.get(key)
            if key == "hypotheses" and not any("sensitivity" in h for h in got[key].values()):
                theirs = {n: _without(h, "sensitivity") for n, h in (theirs or {}).items()}
            check(key, got[key], theirs)
    runs = {run["label"]: run for run in summary["runs"]}
    for run in got["runs"]:
        theirs = runs.get(run["run"])
        if theirs is None:
            out.append(f"runs[{run['run']}]")
            continue
        check(f"runs[{run['run']}].method", run["method"], theirs["method"])
        for key, value in run.items():
            if key not in ("run", "method"):
                check(f"runs[{run['run']}].{key}", value, theirs.get(key))
    return out


def _without(block: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != key}
