"""The test of truth: recorded events summed over a run must equal vLLM's counters."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tokenlens.engine.results import SpecCounters


def counters_from_events(events: pa.Table, empty_steps: int = 0) -> SpecCounters:
    """What vLLM's counters would be if they were computed from these events.

    ``empty_steps``: verification steps vLLM counted that have no event row (every
    draft invalidated by a grammar: :attr:`tokenlens.capture.events.Capture.empty_steps`,
    the manifest's ``capture.steps_without_draft_tokens``). vLLM counts each as a draft
    with no draft token, so they add to ``num_drafts`` only.
    """
    if events.num_rows == 0:
        return SpecCounters(num_drafts=empty_steps)
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
        num_drafts=steps + empty_steps,
        num_draft_tokens=events.num_rows,
        num_accepted_tokens=accepted.num_rows,
        accepted_per_position=tuple(per_pos),
    )


COUNTS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")


@dataclass(frozen=True)
class Reconciliation:
    """Events against vLLM's counters: ``ours - vllm`` on :class:`SpecCounters`.

    ``events`` are the counters the events imply, padded to vLLM's per-position width
    (so that equal means equal); ``difference`` is ``events - vllm``, zero when exact.
    """

    events: SpecCounters
    vllm: SpecCounters
    difference: SpecCounters
    problems: list[str]

    @property
    def exact(self) -> bool:
        return not self.problems


def reconciliation(events: pa.Table, vllm: SpecCounters, empty_steps: int = 0) -> Reconciliation:
    """Compare the events with vLLM's counters (every field, per position too)."""
    derived = counters_from_events(events, empty_steps)
    difference = derived - vllm
    width = len(difference.accepted_per_position)
    ours, theirs = derived.padded(width), vllm.padded(width)
    problems = [
        f"{name}: events {getattr(ours, name)} != vLLM {getattr(theirs, name)}"
        for name in COUNTS
        if getattr(difference, name)
    ]
    if any(difference.accepted_per_position):
        problems.append(
            f"accepted_per_position: events {list(ours.accepted_per_position)} "
            f"!= vLLM {list(theirs.accepted_per_position)}"
        )
    return Reconciliation(ours, vllm, difference, problems)


def reconcile(events: pa.Table, vllm: SpecCounters, empty_steps: int = 0) -> list[str]:
    """Differences between events and vLLM's counters (empty list: exact match)."""
    return reconciliation(events, vllm, empty_steps).problems


def per_step_counts(
    events: pa.Table, empty: Iterable[tuple[str, int]] = ()
) -> dict[str, tuple[list[int], list[int]]]:
    """Request -> (accepted drafts per step, drafts per step), in step order.

    ``empty``: (request, step) of counted steps without event rows (no counted draft
    token), which vLLM's per-request metrics list as 0 accepted of 0 drafted.
    """
    out: dict[str, dict[int, list[int]]] = {}
    for rid, step in empty:
        out.setdefault(rid, {})[step] = [0, 0]
    cols = events.select(["request_id", "step", "accepted"]).to_pydict()
    for rid, step, accepted in zip(cols["request_id"], cols["step"], cols["accepted"], strict=True):
        counts = out.setdefault(rid, {}).setdefault(step, [0, 0])
        counts[0] += bool(accepted)
        counts[1] += 1
    return {
        rid: ([steps[s][0] for s in sorted(steps)], [steps[s][1] for s in sorted(steps)])
        for rid, steps in out.items()
    }


def reconcile_per_request(
    events: pa.Table, reported: dict[str, dict[str, Any]], empty: Iterable[tuple[str, int]] = ()
) -> list[str]:
    """Differences between each request's events and vLLM's per-request spec-decode metrics.

    ``reported`` maps run request ids to vLLM's ``RequestSpecDecodeMetrics.to_dict()``
    (``--per-request-spec-decode-metrics``). With the ``detailed`` level the ordered
    per-step accepted/proposed counts must equal the events step by step; with
    ``summary`` only the request's totals can be compared.
    """
    ours = per_step_counts(events, empty)
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


def per_request_summary(
    events: pa.Table, reported: dict[str, dict[str, Any]], empty: Iterable[tuple[str, int]] = ()
) -> dict[str, Any]:
    """The manifest's ``per_request_reconciliation`` (next to ``reconciliation``)."""
    if not reported:
        return {"available": False, "requests": 0, "exact": None, "differences": []}
    detailed = all("per_step_accepted" in m for m in reported.values() if m.get("num_spec_steps"))
    problems = reconcile_per_request(events, reported, empty)
    return {
        "available": True,
        "level": "detailed" if detailed else "summary",
        "requests": len(reported),
        "exact": not problems,
        "differences": problems[:20],
    }
