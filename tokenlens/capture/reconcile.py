"""The test of truth: recorded events summed over a run must equal vLLM's counters."""

from __future__ import annotations

from typing import Any

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


def per_step_counts(events: pa.Table) -> dict[str, tuple[list[int], list[int]]]:
    """Request -> (accepted drafts per step, drafts per step), in step order."""
    out: dict[str, dict[int, list[int]]] = {}
    cols = events.select(["request_id", "step", "accepted"]).to_pydict()
    for rid, step, accepted in zip(cols["request_id"], cols["step"], cols["accepted"], strict=True):
        counts = out.setdefault(rid, {}).setdefault(step, [0, 0])
        counts[0] += bool(accepted)
        counts[1] += 1
    return {
        rid: ([steps[s][0] for s in sorted(steps)], [steps[s][1] for s in sorted(steps)])
        for rid, steps in out.items()
    }


def reconcile_per_request(events: pa.Table, reported: dict[str, dict[str, Any]]) -> list[str]:
    """Differences between each request's events and vLLM's per-request spec-decode metrics.

    ``reported`` maps run request ids to vLLM's ``RequestSpecDecodeMetrics.to_dict()``
    (``--per-request-spec-decode-metrics``). With the ``detailed`` level the ordered
    per-step accepted/proposed counts must equal the events step by step; with
    ``summary`` only the request's totals can be compared.
    """
    ours = per_step_counts(events)
    problems = []
    for rid in sorted(reported):
        metrics = reported[rid]
        accepted, drafted = ours.get(rid, ([], []))
        if "per_step_accepted" in metrics or "per_step_drafted" in metrics:
            want_a = [int(x) for x in metrics.get("per_step_accepted") or []]
            want_d = [int(x) for x in metrics.get("per_step_drafted") or []]
            if (accepted, drafted) != (want_a, want_d):
                problems.append(
                    f"{rid}: events accepted/drafted per step {accepted}/{drafted} != "
                    f"vLLM {want_a}/{want_d}"
                )
            continue
        got = (len(accepted), sum(accepted), sum(drafted))
        want = (
            int(metrics.get("num_spec_steps", 0)),
            int(metrics.get("num_accepted_draft_tokens", 0)),
            int(metrics.get("num_draft_tokens", 0)),
        )
        if got != want:
            problems.append(f"{rid}: events steps/accepted/drafted {got} != vLLM {want}")
    return problems


def per_request_summary(events: pa.Table, reported: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The manifest's ``per_request_reconciliation`` (next to ``reconciliation``)."""
    if not reported:
        return {"available": False, "requests": 0, "exact": None, "differences": []}
    detailed = all("per_step_accepted" in m for m in reported.values() if m.get("num_spec_steps"))
    problems = reconcile_per_request(events, reported)
    return {
        "available": True,
        "level": "detailed" if detailed else "summary",
        "requests": len(reported),
        "exact": not problems,
        "differences": problems[:20],
    }
