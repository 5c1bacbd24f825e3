"""The test of truth: recorded events summed over a run must equal vLLM's counters."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from tokenlens.engine.results import SpecCounters


def counters_from_events(events: pa.Table) -> SpecCounters:
    """What vLLM's counters would be if they were computed from these events."""
    if events.num_rows == 0:
        return SpecCounters()
    accepted = events.filter(pc.field("accepted"))
    per_pos: list[int] = []
    if accepted.num_rows:
        counts = pc.value_counts(accepted.column("position")).to_pylist()
        width = max(int(c["values"]) for c in counts) + 1
        per_pos = [0] * width
        for c in counts:
            per_pos[int(c["values"])] = int(c["counts"])
    steps = events.group_by(["request_id", "step"]).aggregate([]).num_rows
    return SpecCounters(
        num_drafts=steps,
        num_draft_tokens=events.num_rows,
        num_accepted_tokens=accepted.num_rows,
        accepted_per_position=tuple(per_pos),
    )


def reconcile(events: pa.Table, vllm: SpecCounters) -> list[str]:
    """Differences between events and vLLM's counters (empty list: exact match)."""
    ours = counters_from_events(events)
    problems = []
    for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        a, b = getattr(ours, name), getattr(vllm, name)
        if a != b:
            problems.append(f"{name}: events {a} != vLLM {b}")
    width = max(len(ours.accepted_per_position), len(vllm.accepted_per_position))
    a_pos = list(ours.accepted_per_position) + [0] * (width - len(ours.accepted_per_position))
    b_pos = list(vllm.accepted_per_position) + [0] * (width - len(vllm.accepted_per_position))
    if a_pos != b_pos:
        problems.append(f"accepted_per_position: events {a_pos} != vLLM {b_pos}")
    return problems
