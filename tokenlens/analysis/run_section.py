"""summary.json's ``runs[]`` and ``margin_in_speed``: one :class:`RunSummary` per
analysed run, built from the joined frame.

:func:`run_section` takes the frame, the run's :class:`RunInfo` and the options and
returns its record (rates, positions, text per step, gap, speed model); a figure a
lower builder returns as a block is typed on entry (:func:`typed`: a key the record
does not declare raises :class:`TypeError`). :func:`margin_section` returns δ in speed
terms per drafter family and k from the runs' records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler
from tokenlens.analysis.breakdown import per_lang, positions, row_mask, text_per_step
from tokenlens.analysis.columns import labels
from tokenlens.analysis.config import AnalyzeConfig
from tokenlens.analysis.decompose import has_pair
from tokenlens.analysis.gap import gap
from tokenlens.analysis.speed import default_cost, margin_in_speed, speed_model
from tokenlens.analysis.summary_fields import typed
from tokenlens.analysis.summary_figures import Estimate, PositionRate, Rate
from tokenlens.analysis.summary_runs import RunSpeed, RunSummary, SpeedModel
from tokenlens.analysis.summary_sections import MarginInSpeed, SpeedMargin
from tokenlens.engine.methods import family_of

R = TypeVar("R")


@dataclass(frozen=True)
class RunInfo:
    """What the summary says about each input run."""

    label: str
    path: str
    method: str
    k: int
    signature: str
    status: str
    metrics: dict[str, Any]
    reconciliation: dict[str, Any] | None = None
    replayed_from: str | None = None
    # Why no verdict may rest on this run (an approximate replay nothing vouches for).
    unvouched: str | None = None
    # Where the run's numbers come from (dtype, weights, the trace a replay came from):
    # written into its runs[] section for FINDINGS' provenance (:func:`provenance`).
    provenance: dict[str, Any] = field(default_factory=dict)


def run_section(
    frame: pd.DataFrame,
    rs: Resampler,
    info: RunInfo,
    config: AnalyzeConfig,
    cost: tuple[float, str] | None,
) -> RunSummary:
    """summary.json ``runs[]``: one run's rates, positions, gap and speed model."""
    mine = labels(frame, "run") == info.label
    sub_judged = mine & row_mask(frame, "judged")
    acceptance = _by_lang(Rate, per_lang(frame, rs, mine, config.min_count))
    judged_rate = _by_lang(Rate, per_lang(frame, rs, sub_judged, config.min_count))
    built_unconditional, built_conditional = positions(frame, rs, mine, config.min_count)
    unconditional = _table(PositionRate, built_unconditional)
    family = family_of(info.method, config.method_families)
    speed = run_speed(acceptance, judged_rate, unconditional, info.k, family, cost)
    unknown = set(info.provenance) - set(RunSummary.PROVENANCE)
    if unknown:  # the record writes these four keys or none
        raise TypeError(f"summary.json: runs[] does not declare {', '.join(sorted(unknown))}")
    prov = info.provenance
    paired = has_pair(frame, mine)
    return RunSummary(
        label=info.label,
        path=info.path,
        method=info.method,
        k=info.k,
        signature=info.signature,
        status=info.status,
        replayed=info.replayed_from is not None,
        replayed_from=info.replayed_from,
        reconciliation={**(info.reconciliation or {"matches": None}), "vllm": info.metrics},
        acceptance=acceptance,
        acceptance_judged=judged_rate,
        by_position=unconditional,
        by_position_conditional=_table(Rate, built_conditional),
        text_per_step=_table(Estimate, text_per_step(frame, rs, mine)),
        dtype=prov.get("dtype"),
        device=prov.get("device"),
        models=tuple(prov["models"]) if "models" in prov else None,
        replay_source=prov.get("replay_source"),
        gap=typed(Estimate, gap(frame, rs, mine)) if paired else None,
        relative_gap_judged=typed(Estimate, gap(frame, rs, sub_judged, relative=True))
        if paired
        else None,
        speed=speed,
    )


def run_speed(
    acceptance: Mapping[str, Rate],
    judged_rate: Mapping[str, Rate],
    unconditional: Mapping[str, Mapping[str, PositionRate]],
    k: int,
    family: str,
    cost: tuple[float, str] | None,
) -> RunSpeed:
    """A run's speed model per language: vLLM's per-draft rates by position
    (``unconditional``, whose ``drafts`` are the run's verification steps per language:
    every draft has a position-0 row), the judged rate, its k, and the draft cost
    (``cost``: measured, with its source; None: the ``family``'s assumed default)."""
    if cost is not None:
        used_cost, cost_source, measured = cost[0], cost[1], True
    else:
        used_cost, cost_source, measured = default_cost(family), "assumed default", False
    speed = {}
    for lang, rate in acceptance.items():
        # vLLM's a_p (accepted at p / all drafts): 1 + the sum is tokens per step
        at = unconditional.get(lang, {})
        curve = [(at[str(p)].per_draft if str(p) in at else None) or 0.0 for p in range(k)]
        n = at["0"].drafts if "0" in at else 0
        tps = 1.0 + int(rate.accepted or 0) / n if n else None
        iid = (judged_rate[lang].rate if lang in judged_rate else None) or 0.0
        model = speed_model(curve, iid, k, used_cost, tps, cost_measured=measured)
        speed[lang] = _typed(SpeedModel, model)
    return RunSpeed(
        draft_cost_source=cost_source,
        draft_cost=used_cost,
        draft_cost_measured=measured,
        by_lang=speed,
    )


def _typed(cls: type[R], block: Any) -> R:
    """:func:`typed` of a block a builder always returns."""
    record = typed(cls, block)
    assert record is not None
    return record


def _by_lang(cls: type[R], block: Mapping[str, Any]) -> dict[str, R]:
    """``{lang: figure}`` from a builder's block, each figure as ``cls`` (:func:`typed`)."""
    return {lang: _typed(cls, v) for lang, v in block.items()}


def _table(cls: type[R], block: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, R]]:
    """``{lang: {group: figure}}`` from a builder's block, each figure as ``cls``."""
    return {lang: _by_lang(cls, groups) for lang, groups in block.items()}


def margin_section(
    runs: Sequence[RunSummary], delta: float, declared: Mapping[str, str] | None = None
) -> MarginInSpeed:
    """δ in speed terms per drafter family and k (:func:`margin_in_speed`), at the
    English judged rate of the runs of that k (the reference a Japanese deficit is
    measured from)."""
    points = []
    for run in runs:
        en = run.acceptance_judged.get("en")
        if en is not None and en.rate is not None:
            family = family_of(str(run.method), declared)
            points.append((family, int(run.k or 0), float(en.rate)))
    return margin_of(points, delta)


def margin_of(points: Sequence[tuple[str, int, float]], delta: float) -> MarginInSpeed:
    """:func:`margin_section` from each run's (drafter family, k, English judged rate)."""
    seen: dict[tuple[str, int], list[float]] = {}
    for family, k, rate in points:
        seen.setdefault((family, k), []).append(rate)
    families: dict[str, dict[str, SpeedMargin]] = {}
    for (family, k), values in sorted(seen.items()):
        families.setdefault(family, {})[str(k)] = margin_in_speed(float(np.mean(values)), k, delta)
    return MarginInSpeed(
        basis="English judged acceptance of the runs at each k; tokens per step by the "
        "i.i.d. formula (1 - a^(k+1)) / (1 - a) (Leviathan et al. 2023)",
        families=families,
    )
