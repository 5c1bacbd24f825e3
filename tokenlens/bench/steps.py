"""A case's step split: the median time of a decoding step, of its drafting and of the
rest (verification: the target's forward pass, sampling, bookkeeping), from the step
timer's lines (:mod:`tokenlens.capture.step_timer`) that fall inside the case's measured
repeats.

Only steps of decodes alone count (``tok == r + sd``: every scheduled request gets one
token plus its drafts; prefill chunks are left out), and for a speculative case only
those that verified drafts. Medians, not means: the first steps after a pause and the
odd scheduler hiccup do not move them. Where no line qualifies, the step columns are
null and ``step_timing`` says why.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenlens.capture.step_timer import STATUS_PREFIX, TIMES_PREFIX

SOURCES = {"cuda": "CUDA events", "cpu": "perf_counter"}


def read_step_times(directory: Path) -> list[dict[str, Any]]:
    """Every step record of the timer's files in ``directory``, each with its ``t``."""
    out = []
    for path in sorted(directory.glob(f"{TIMES_PREFIX}-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                data = json.loads(line)
            except ValueError:
                continue  # a torn last line
            for record in data.get("reqs") or []:
                out.append({**record, "t": data.get("t")})
    return out


def timer_problem(directory: Path) -> str | None:
    """Why the timer timed nothing or no drafting, from its status files (None: it ran)."""
    for path in sorted(directory.glob(f"{STATUS_PREFIX}-*.json")):
        try:
            status = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if status.get("state") in ("refused", "failed"):
            return f"step timer {status['state']}: {status.get('problem')}"
        draft = status.get("draft")
        if draft not in (None, "timed"):
            return f"drafting not timed: {draft}"
    return None


def step_split(
    directory: Path | None,
    windows: Sequence[tuple[float, float]],
    speculative: bool,
) -> dict[str, Any]:
    """Medians over the decode steps inside ``windows`` (wall-clock start, end)."""
    empty: dict[str, Any] = {
        "step_ms": None,
        "draft_ms": None,
        "verify_ms": None,
        "timed_steps": 0,
        "timer_us": None,
    }
    if directory is None:
        return {**empty, "step_timing": "no trace directory (a plain or server run)"}
    problem = timer_problem(directory)
    records = [
        r
        for r in read_step_times(directory)
        if r.get("s") is not None
        and r.get("t") is not None
        and any(start <= r["t"] <= end for start, end in windows)
        and r.get("r")
        and r.get("tok") == r.get("r", 0) + r.get("sd", 0)
        and (r.get("sd", 0) > 0) == speculative
    ]
    if not records:
        why = problem or "the step timer recorded no decode step in the measured repeats"
        return {**empty, "step_timing": why}
    steps = [float(r["s"]) for r in records]
    own = [float(r["o"]) for r in records if r.get("o") is not None]
    out = {
        **empty,
        "step_ms": 1e3 * statistics.median(steps),
        "timed_steps": len(records),
        "timer_us": 1e6 * statistics.median(own) if own else None,
        "step_timing": SOURCES.get(str(records[0].get("src")), str(records[0].get("src"))),
    }
    drafted = [r for r in records if r.get("d") is not None]
    if speculative and drafted:
        out["draft_ms"] = 1e3 * statistics.median(float(r["d"]) for r in drafted)
        out["verify_ms"] = 1e3 * statistics.median(float(r["s"]) - float(r["d"]) for r in drafted)
    elif speculative:
        out["step_timing"] = problem or "no drafting was timed in the decode steps"
    return out
