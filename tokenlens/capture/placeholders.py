"""Placeholder drafts (-1): when vLLM's scheduler never sees the real draft ids.

Two sources, both read from vLLM's scheduler:

- **Async scheduling.** With ``AsyncScheduler`` the drafts of step N+1 are proposed on
  the device while step N is still being reconciled, so the scheduler schedules
  ``[-1] * k`` and the real ids never reach it. Whether an engine schedules
  asynchronously is vLLM's decision, which depends on the release, the platform, the
  model runner and the method (0.32/0.33 turn it on by default on GPUs for EAGLE, MTP,
  D-Flash and draft models; the V2 runner drafts n-gram on the device too; the CPU
  build turns it off). tokenlens keeps no list of it: it reads the resolved
  ``SchedulerConfig.async_scheduling`` of the engine that runs
  (:mod:`tokenlens.engine.facts`; ``doctor`` resolves it per method on stand-in
  models). ``--no-async-scheduling`` (vLLM) / ``async_scheduling=False`` turns it off.
- **Padding.** Even without async scheduling, a waiting request with exactly one token
  left to compute (a fully cached prompt, a resumed request) is padded with
  ``[-1] * k`` drafts to keep a uniform batch shape, and vLLM counts that step.

The accept/reject pattern and every emitted token stay exact; only the identity of a
*rejected* placeholder draft is lost (an accepted one equals its emitted token).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def async_note(engine: dict[str, Any] | None) -> str | None:
    """One warning line when the engine's resolved config schedules asynchronously."""
    if not engine or not engine.get("async_scheduling") or not engine.get("speculative_method"):
        return None
    return lost_identity_warning(str(engine["speculative_method"]))


def lost_identity_warning(method: str) -> str:
    """One line: what async scheduling costs the trace, and how to keep the identities."""
    return (
        f"vLLM resolved async scheduling on for {method} here: the scheduler sees -1 "
        "placeholder drafts, so rejected drafts' token ids are lost (acceptance stays "
        "exact); pass --no-async-scheduling to keep them (vLLM then overlaps less: slower "
        "steps)"
    )


def placeholder_stats(events: pa.Table | None) -> dict[str, Any]:
    """Counts of placeholder drafts in a run's events, and how many hide a rejected id."""
    if events is None or events.num_rows == 0:
        return {"count": 0, "share": None, "rejected": 0, "rejected_share": None}
    placeholder = pc.equal(events.column("draft_token_id"), -1)
    count = int(pc.sum(placeholder).as_py() or 0)
    rejected_mask = pc.invert(events.column("accepted"))
    rejected = int(pc.sum(pc.and_(placeholder, rejected_mask)).as_py() or 0)
    n_rejected = int(pc.sum(rejected_mask).as_py() or 0)
    return {
        "count": count,
        "share": count / events.num_rows,
        "rejected": rejected,
        "rejected_share": rejected / n_rejected if n_rejected else None,
    }
