"""What a run's manifest records about its capture (the ``capture`` key).

Read from the capture directory after the engine stopped: the status files each hooked
engine process wrote (``capture-<host>-<pid>.json``: tier, surface fingerprint,
scheduler class, async scheduling, failures), the hook's self-timing carried by the
step lines, and the placeholder drafts in the events. See docs/capture.md.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tokenlens.capture.events import Capture
from tokenlens.capture.placeholders import placeholder_stats
from tokenlens.capture.reconcile import per_request_summary

STATUS_GLOB = "capture-*.json"
RUNNER_STATUS_GLOB = "runner-*.json"
TIMER_STATUS_GLOB = "steptimer-*.json"


def read_statuses(directory: Path, glob: str = STATUS_GLOB) -> list[dict[str, Any]]:
    out = []
    for path in sorted(directory.glob(glob)):
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return out


def hook_cost(capture: Capture) -> dict[str, Any]:
    """The hook's time as a share of the scheduler's step time.

    ``share``: hook seconds on the scheduler's thread / wall seconds between step
    lines; ``share_with_writer`` adds the writer thread's time. Idle time counts as
    step time, so pauses understate both; ``median_step_share`` is not affected.
    """
    timed = [(h, w, wt) for h, w, wt in capture.timing if w]
    if not timed:
        return {"steps": 0, "share": None}
    hook = sum(h for h, _, _ in timed)
    writer = sum(wt or 0.0 for _, _, wt in timed)
    wall = sum(w for _, w, _ in timed if w)
    return {
        "steps": len(timed),
        "hook_seconds": round(hook, 6),
        "writer_seconds": round(writer, 6),
        "step_seconds": round(wall, 3),
        "share": hook / wall if wall else None,
        "share_with_writer": (hook + writer) / wall if wall else None,
        "median_step_share": statistics.median(h / w for h, w, _ in timed if w),
        "hook_us_per_step": 1e6 * hook / len(timed),
    }


def draft_id_summary(directory: Path, capture: Capture, events: pa.Table | None) -> dict[str, Any]:
    """The manifest's ``capture.draft_ids``: where the ids came from, how many are unknown.

    ``source``: ``model_runner`` when the Model Runner V2 hook recorded, else
    ``scheduler``; ``unknown``: event rows still -1 (``unknown_steps``: steps with any);
    ``complete``: none unknown; ``problem``: why ids were not recovered, where the
    runner hook refused or failed.
    """
    runners = read_statuses(directory, RUNNER_STATUS_GLOB)
    recording = [r for r in runners if r.get("state") == "recording"]
    bad = [r for r in runners if r.get("state") in ("refused", "failed")]
    rows = events.num_rows if events is not None else 0
    unknown = unknown_steps = 0
    if events is not None and rows:
        draft = events.column("draft_token_id").to_numpy()
        unknown = int((draft < 0).sum())
        if unknown:
            mask = pc.less(events.column("draft_token_id"), 0)
            hit = events.filter(mask).select(["request_id", "step"])
            unknown_steps = len(set(zip(*(c.to_pylist() for c in hit.columns), strict=True)))
    ids = capture.draft_ids
    out: dict[str, Any] = {
        "source": "model_runner" if recording else "scheduler",
        "runner": (runners[0].get("runner") if runners else None),
        "speculator_class": next(
            (r.get("speculator_class") for r in recording if r.get("speculator_class")), None
        ),
        "placeholders": ids["placeholders"],
        "recovered": ids["recovered"],
        "disagreements": ids["disagreements"],
        "unknown": unknown,
        "unknown_share": unknown / rows if rows else None,
        "unknown_steps": unknown_steps,
        "complete": unknown == 0,
        "problem": "; ".join(str(r.get("problem")) for r in bad) or None,
    }
    if not out["complete"] and out["problem"] is None:
        out["problem"] = (
            f"{ids['disagreements']} steps whose model-runner record contradicts the verdicts"
            if ids["disagreements"]
            else "the scheduler saw -1 placeholders (async scheduling on the V1 runner, or "
            "padded waiting requests) and no model-runner record supplies them"
        )
    return out


def empty_steps_json(empty: list[tuple[str, int]]) -> dict[str, Any]:
    """The manifest's ``capture.steps_without_draft_tokens``: vLLM counted these steps
    (``num_drafts``) but every draft was invalidated by a grammar, so they have no row."""
    return {"count": len(empty), "steps": [[rid, step] for rid, step in empty]}


def empty_step_count(manifest: dict[str, Any]) -> int:
    """How many counted steps of a run have no event row (0 for runs written before)."""
    capture = manifest.get("capture")
    empty = capture.get("steps_without_draft_tokens") if isinstance(capture, dict) else None
    return int(empty.get("count") or 0) if isinstance(empty, dict) else 0


def once_problems(capture: Capture) -> list[str]:
    """Why some draft may have been recorded more than once (empty: each once)."""
    out = []
    if capture.split:
        out.append(
            f"{len(capture.split)} request(s) recorded by two engine processes "
            f"(first: {capture.split[0]})"
        )
    if capture.draft_ids.get("duplicate_writers"):
        out.append(
            f"{capture.draft_ids['duplicate_writers']} model-runner step(s) recorded by two "
            "ranks of one engine"
        )
    return out


def engine_cores(seen: list[dict[str, Any]], capture: Capture) -> list[dict[str, Any]]:
    """One entry per engine process that ran a scheduler: its data-parallel index (vLLM's
    ``data_parallel_index``), host-free pid, and the verification steps it recorded."""
    steps = {
        name.removeprefix("steps-").removesuffix(".jsonl"): n for name, n in capture.cores.items()
    }
    out = []
    for status in seen:
        parallel = status.get("parallel") or {}
        out.append(
            {
                "pid": status.get("pid"),
                "tag": status.get("tag"),
                "data_index": parallel.get("data_index"),
                "steps_with_drafts": steps.get(str(status.get("tag")), None),
            }
        )
    return sorted(out, key=lambda c: (c["data_index"] is None, c["data_index"] or 0, c["pid"] or 0))


def capture_summary(directory: Path, capture: Capture, events: pa.Table | None) -> dict[str, Any]:
    """The manifest's ``capture`` object (see docs/formats.md)."""
    statuses = read_statuses(directory)
    # The engine processes that ran a scheduler (or refused to); others never stepped.
    seen = [s for s in statuses if "scheduler_class" in s or s.get("state") != "recording"]
    first = seen[0] if seen else (statuses[0] if statuses else {})
    problems = [f"pid {s.get('pid')}: {s['problem']}" for s in seen if s.get("problem")]
    problems += once_problems(capture)
    states = {s.get("state") for s in seen}
    if "refused" in states:
        state = "refused"
    elif "failed" in states or once_problems(capture):
        state = "failed"
    elif not seen:
        state = "silent"  # the hook never saw a scheduler step
    else:
        state = "ok"
    return {
        "state": state,
        "problems": problems,
        "tier": first.get("tier"),
        "tier_note": first.get("tier_note"),
        "vllm_version": first.get("vllm_version"),
        "surface_fingerprint": first.get("fingerprint"),
        "scheduler_class": first.get("scheduler_class"),
        "async_scheduling": first.get("async_scheduling"),
        "per_request_metrics": first.get("per_request_metrics"),
        "num_sampled_tokens_per_step": first.get("num_sampled_tokens_per_step"),
        "engine_processes": len(seen),
        "engine_cores": engine_cores(seen, capture),
        "placeholder_drafts": placeholder_stats(events),
        "draft_ids": draft_id_summary(directory, capture, events),
        "filler_drafts": capture.fillers,
        "steps_without_draft_tokens": empty_steps_json(capture.empty_steps),
        "hook": hook_cost(capture),
    }


def parallel_seen(directory: Path) -> dict[str, Any]:
    """What the capture's processes saw of vLLM's parallel layout.

    ``engine_cores``: processes that ran a scheduler; ``data_parallel_indices``: their
    ``data_parallel_index`` values; ``worker_ranks``: each worker-side recorder (the
    Model Runner V2 draft ids, the step timer) with its ranks and whether it recorded.
    """
    cores = [s for s in read_statuses(directory) if "scheduler_class" in s]
    indices = {(s.get("parallel") or {}).get("data_index") for s in cores} - {None}
    workers = []
    for recorder, glob in (("model_runner", RUNNER_STATUS_GLOB), ("step_timer", TIMER_STATUS_GLOB)):
        for status in read_statuses(directory, glob):
            ranks = status.get("ranks")
            if isinstance(ranks, dict):
                keep = ("tp", "pp", "pcp", "data_index", "rank_source")
                workers.append(
                    {
                        "recorder": recorder,
                        "state": status.get("state"),
                        **{k: ranks.get(k) for k in keep},
                    }
                )
    workers.sort(key=lambda w: (w["recorder"], str(w["data_index"]), w["tp"] or 0, w["pp"] or 0))
    return {
        "engine_cores": len(cores),
        "data_parallel_indices": sorted(indices),
        "worker_ranks": workers,
    }


def with_parallel_seen(engine: dict[str, Any], directory: Path) -> dict[str, Any]:
    """``engine`` with ``parallel`` completed by :func:`parallel_seen`.

    Where more engine cores were seen than the config's data-parallel size (vLLM
    resets it to 1 in each core of a dense model), ``data`` is the number of
    data-parallel indices seen and ``data_source`` says so.
    """
    parallel = {**(engine.get("parallel") or {}), **parallel_seen(directory)}
    seen = len(parallel["data_parallel_indices"])
    if seen > (parallel.get("data") or 1):
        parallel["data"] = seen
        parallel["data_source"] = "engine cores seen (vLLM resets a dense model's core to 1)"
    return {**engine, "parallel": parallel}


SERVED_WORKERS = (
    "a vllm serve's workers cannot be asked from outside; recorded: what its scheduler "
    "process read from the resolved config"
)


def served_engine_facts(directory: Path) -> dict[str, Any] | None:
    """The manifest's ``engine`` for a run against ``vllm serve``: the plugin's view.

    Config facts from the plugin's status file (:func:`tokenlens.engine.facts.config_facts`
    in the scheduler process); the drafter's and model runner's classes stay null with
    the reason under ``unavailable``.
    """
    from tokenlens.engine.facts import merge_facts

    for status in read_statuses(directory):
        facts = status.get("engine")
        if isinstance(facts, dict) and "error" not in facts:
            return merge_facts(facts, None, SERVED_WORKERS, source="plugin")
    return None


def capture_problem(summary: dict[str, Any], drafts_counted: int) -> str | None:
    """Why the run's capture cannot be trusted (one line), or None."""
    if summary["state"] in ("refused", "failed"):
        return f"capture {summary['state']}: {'; '.join(summary['problems'])}"
    if summary["state"] == "silent" and drafts_counted:
        return (
            "vLLM counted drafts but the tokenlens hook never saw a scheduler step "
            "(a scheduler class that does not derive from vLLM's Scheduler?)"
        )
    return None


def record_capture(
    directory: Path,
    capture: Capture,
    events: pa.Table | None,
    reported: dict[str, dict[str, Any]],
    drafts_counted: int,
) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """(manifest ``capture``, manifest ``per_request_reconciliation``, problem or None).

    ``reported``: run request id -> vLLM's per-request spec-decode metrics, where the
    engine reported them (``--per-request-spec-decode-metrics``).
    """
    summary = capture_summary(directory, capture, events)
    per_request = (
        per_request_summary(events, reported, capture.empty_steps) if events is not None else {}
    )
    problem = capture_problem(summary, drafts_counted)
    if problem is None and per_request.get("exact") is False:
        problem = f"events differ from vLLM's per-request metrics ({per_request['differences'][0]})"
    return summary, per_request, problem
