"""Replay against tracing: events of two runs of the same prompts, row for row.

Rows are matched by (request, step, position) and equal when all seven columns are.
Once two runs disagree about one step, every later step of that request shifts, so
per request the first difference is what explains the rest; :class:`RequestDiff`
keeps it, with the outputs' first difference (the target itself can differ between
two runs where its logits nearly tie).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tokenlens.capture.events import EVENTS_SCHEMA
from tokenlens.rundir import Run

KEY = ("request_id", "step", "position")


@dataclass(frozen=True)
class RequestDiff:
    """How one request's events differ between a traced and a replayed run."""

    request_id: str
    rows_traced: int
    rows_replayed: int
    equal_rows: int
    first_traced: dict[str, Any] | None  # the traced row at the first difference
    first_replayed: dict[str, Any] | None
    # First output index where the two runs' target outputs differ (None: identical).
    output_divergence: int | None


@dataclass(frozen=True)
class Agreement:
    """Row-for-row agreement of two runs over the requests both have."""

    requests: int
    rows_traced: int
    rows_replayed: int
    equal_rows: int
    differing: tuple[RequestDiff, ...]

    @property
    def exact(self) -> bool:
        return not self.differing


def _rows(run: Run) -> dict[str, list[dict[str, Any]]]:
    assert run.events is not None, f"{run.path} has no events"
    out: dict[str, list[dict[str, Any]]] = {}
    for row in run.events.select(EVENTS_SCHEMA.names).to_pylist():
        out.setdefault(row["request_id"], []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: (r["step"], r["position"]))
    return out


def _outputs(run: Run) -> dict[str, list[int]]:
    pairs = run.requests.select(["request_id", "output_token_ids"]).to_pylist()
    return {p["request_id"]: list(p["output_token_ids"]) for p in pairs}


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """First index where two token lists differ (a prefix differs at its end)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def compare_runs(traced: Run, replayed: Run) -> Agreement:
    """Compare the events of every request the two runs share."""
    real, mine = _rows(traced), _rows(replayed)
    real_out, mine_out = _outputs(traced), _outputs(replayed)
    shared = [rid for rid in real_out if rid in mine_out]
    diffs = []
    totals = [0, 0, 0]
    for rid in shared:
        a, b = real.get(rid, []), mine.get(rid, [])
        by_key = {tuple(r[c] for c in KEY): r for r in b}
        equal = sum(1 for r in a if by_key.get(tuple(r[c] for c in KEY)) == r)
        totals[0] += len(a)
        totals[1] += len(b)
        totals[2] += equal
        if equal == len(a) == len(b):
            continue
        first = next(
            (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
        diffs.append(
            RequestDiff(
                request_id=rid,
                rows_traced=len(a),
                rows_replayed=len(b),
                equal_rows=equal,
                first_traced=a[first] if first < len(a) else None,
                first_replayed=b[first] if first < len(b) else None,
                output_divergence=first_divergence(real_out[rid], mine_out[rid]),
            )
        )
    return Agreement(
        requests=len(shared),
        rows_traced=totals[0],
        rows_replayed=totals[1],
        equal_rows=totals[2],
        differing=tuple(diffs),
    )


def known_rows(check: Mapping[str, Any]) -> dict[str, int | None]:
    """A replay check (replay/check.json) counted over the rows where the replay knows
    the draft: ``known`` (traced rows less the drafts the replay left −1),
    ``equal_known`` (of them, equal in all seven columns: a row whose replayed draft is
    −1 is never equal in all of them), ``unknown`` and ``unknown_differ`` (unknown rows
    that differ in another column). None where the check lacks a count."""
    rows, unknown = check.get("rows_traced"), check.get("unknown_drafts")
    equal, judged = check.get("equal_rows"), check.get("equal_judged")
    if not isinstance(rows, int) or not isinstance(unknown, int):
        return {"known": None, "equal_known": None, "unknown": None, "unknown_differ": None}
    differ = (
        unknown - (judged - equal) if isinstance(judged, int) and isinstance(equal, int) else None
    )
    return {
        "known": rows - unknown,
        "equal_known": equal if isinstance(equal, int) else None,
        "unknown": unknown,
        "unknown_differ": differ,
    }
