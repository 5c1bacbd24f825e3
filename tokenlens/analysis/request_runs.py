"""Per-run figures from per-request counts: what summary.json's ``runs[]`` holds that is
a sum of ``request-stats``' counts, one run (one drafter and k) at a time, never pooled
over k.

Per run: ``acceptance`` and ``acceptance_judged`` per language, ``text_per_step``,
``gap`` (every draft) and ``relative_gap_judged``; from a table counted by draft
position (``request-stats --by position``) also ``by_position`` (accepted at p over the
steps with a draft at p, with vLLM's ``per_draft`` rate) and
``by_position_conditional`` (over the steps that reached p: the table's ``reached``)
and the ``speed`` model (the draft cost: measured and given, else the drafter family's
assumed default, as ``analyze`` without ``--bench``).
The functions are the analysis' own (:func:`~tokenlens.analysis.breakdown.positions`
counts steps through the resampler, so counted rows count as their events), with the
whole study's resampler: the same draws as ``analyze``'s ``runs[]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler
from tokenlens.analysis.breakdown import per_lang, per_step, positions
from tokenlens.analysis.decompose import has_pair
from tokenlens.analysis.gap import gap
from tokenlens.analysis.parts import rate_records
from tokenlens.analysis.run_section import run_speed
from tokenlens.analysis.summary_fields import json_value, typed
from tokenlens.analysis.summary_figures import Estimate
from tokenlens.arrays import F64, Mask

POSITION = "position"
"""The class column whose counts give the rates by draft position."""


@dataclass(frozen=True)
class CountedRows:
    """One table's rows as the figure functions read them: ``frame`` (a row per row of
    the table, ``accepted`` the figure's own count), ``rs`` (each row weighed by its
    count of events) and ``keep`` (the table's rows it holds, a mask of the table)."""

    frame: pd.DataFrame
    rs: Resampler
    keep: Mask

    def of(self, table_rows: Mask) -> Mask:
        """``table_rows`` (a mask of the table) as a mask of these rows."""
        return table_rows[self.keep]


def run_blocks(
    runs: list[str],
    run_of: np.ndarray[Any, np.dtype[np.object_]],
    events: CountedRows,
    judged: CountedRows,
    reached: CountedRows | None,
    steps: F64,
    text: dict[str, F64],
    min_count: int,
    cost: tuple[float, str] | None = None,
) -> list[dict[str, Any]]:
    """summary.json ``runs[]``'s figures of per-request counts, one block per run in
    ``runs`` (``run_of``: each table row's run): ``run``, ``method``, ``k``, rates,
    text per step, gaps and, with ``reached`` (a table counted by position), the rates
    by position; ``steps`` and ``text``: per table row, its steps and accepted tokens,
    characters and bytes (:func:`~tokenlens.analysis.breakdown.per_step`)."""
    out = []
    for run in runs:
        mine = run_of == run
        rows, judged_rows = events.of(mine), judged.of(mine)
        first = int(np.flatnonzero(rows)[0])
        block: dict[str, Any] = {
            "run": run,
            "method": str(events.frame["method"].iloc[first]),
            "k": int(events.frame["k"].iloc[first]),
            "acceptance": per_lang(events.frame, events.rs, rows, min_count),
            "acceptance_judged": per_lang(judged.frame, judged.rs, judged_rows, min_count),
        }
        if reached is not None:
            unconditional, conditional = positions(
                events.frame,
                events.rs,
                rows,
                min_count,
                reached=(reached.frame, reached.rs, reached.of(mine)),
            )
            block["by_position"] = json_value(unconditional)
            block["by_position_conditional"] = json_value(conditional)
            family = str(events.frame["family"].iloc[first])
            speed = run_speed(
                rate_records(block["acceptance"]),
                rate_records(block["acceptance_judged"]),
                unconditional,
                block["k"],
                family,
                cost,
            )
            block["speed"] = json_value(speed)
        block["text_per_step"] = per_step(events.frame, events.rs, rows, steps, text)
        paired = has_pair(events.frame, rows)
        block["gap"] = estimate_json(gap(events.frame, events.rs, rows)) if paired else None
        block["relative_gap_judged"] = (
            estimate_json(gap(judged.frame, judged.rs, judged_rows, relative=True))
            if paired
            else None
        )
        out.append(block)
    return out


def estimate_json(block: dict[str, Any]) -> Any:
    """A builder's estimate block as summary.json writes it (typed on the way)."""
    return json_value(typed(Estimate, block))
