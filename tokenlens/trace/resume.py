"""``tokenlens trace --resume``: complete a ``partial`` run, keeping what finished and
generating only what is missing.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from tokenlens.capture.events import EVENTS_WRITE_SCHEMA, Capture, build_capture
from tokenlens.capture.reconcile import reconcile
from tokenlens.capture.summary import record_capture
from tokenlens.engine.backend import Backend
from tokenlens.engine.config import (
    PromptJob,
)
from tokenlens.engine.results import GeneratedRequest, SpecCounters
from tokenlens.engine.runner import (
    Engine,
    check_prompt_lengths,
)
from tokenlens.errors import TokenlensError, os_error_line
from tokenlens.format_version import RUN as RUN_FORMAT
from tokenlens.format_version import check_readable
from tokenlens.progress import SILENT, Progress
from tokenlens.prompts import read_prompts
from tokenlens.rundir import (
    CAPTURE,
    MANIFEST,
    METRICS,
    RESUME_PREFIX,
    RunWriter,
    continue_hint,
    now_iso,
    requests_table,
    write_events,
    write_json_atomic,
)
from tokenlens.salvage import attempt_dirs
from tokenlens.signature import parse_signature
from tokenlens.trace.checks import installed_vllm
from tokenlens.trace.config import StartBackend, config_from_json, select_prompts, trace_jobs
from tokenlens.trace.generate import generate_or_salvage, salvage_run
from tokenlens.trace.manifest import engine_fields, manifest_for, reported_per_request
from tokenlens.trace.models import build_engine_config
from tokenlens.trace.run import run_trace


def resume_trace(run: Path, progress: Progress = SILENT, start: StartBackend = Engine) -> Path:
    """Complete a ``partial`` run: keep what finished, generate only what is missing.

    The requests the worker recorded as finished are kept with their events (from
    the step files of the attempt they finished in); every other selected prompt is
    generated again by a new engine that records into ``capture/resume-<n>/``. The
    new part is reconciled exactly with the new engine's counters; the salvaged part
    has only its step files (vLLM's counters died with the first engine), so
    ``metrics.json`` is their sum and says which part came from where (docs/formats.md).
    If the engine cannot start or dies again, the run stays ``partial`` with
    everything recorded so far, and can be resumed again.
    """
    manifest = _resumable_manifest(run)
    if manifest.get("server"):
        return _resume_served(run, manifest, progress)
    writer = RunWriter.reopen(run)  # locked before anything is written
    try:
        return _resume_into(writer, manifest, run, progress, start)
    except OSError as exc:  # a full disk, a permission: one line; resuming again continues
        raise TokenlensError(
            f"{os_error_line(exc)} — {run} stays partial; {continue_hint(run, manifest)}"
        ) from None
    finally:
        writer.release()


def _resume_into(
    writer: RunWriter,
    manifest: dict[str, Any],
    run: Path,
    progress: Progress,
    start: StartBackend = Engine,
) -> Path:
    """:func:`resume_trace` inside the locked run directory."""
    config = config_from_json(manifest["trace_config"], run)
    prompts = select_prompts(read_prompts(config.prompts), config.langs, config.limit)
    jobs = trace_jobs(config, prompts)
    langs = {p.id: p.lang for p in prompts}
    pairs = {p.id: p.pair for p in prompts}
    # First make the directory an analysable partial run from what was recorded, so
    # that whatever happens next (no vLLM here, an engine that fails) nothing is lost.
    kept = salvage_run(config, jobs, langs, pairs).finished_only()
    missing = [job for job in jobs if job.rid not in kept.finished]
    attempt = run / CAPTURE / f"{RESUME_PREFIX}{len(attempt_dirs(run))}"
    result = None
    new_events = EVENTS_WRITE_SCHEMA.empty_table()
    new_empty = 0  # counted steps without rows in the resumed part (reconcile.py)
    new_counters = SpecCounters()
    generated: list[GeneratedRequest] = []
    resumed: Capture | None = None
    engine: Backend | None = None
    if missing:
        try:
            vllm_version = installed_vllm()
        except TokenlensError as exc:
            raise TokenlensError(f"{exc}; {run} was salvaged and stays partial") from None
        expected = manifest_for(config, prompts, vllm_version)["signature"]
        if expected != manifest["signature"]:
            raise TokenlensError(
                f"cannot resume {run} (salvaged, it stays partial): its signature no longer "
                "matches the prompt file and the installed versions "
                f"({_first_difference(manifest['signature'], expected)})"
            )
        engine_config = replace(build_engine_config(config, progress), trace_dir=str(attempt))
        progress.stage("check prompt lengths")
        check_prompt_lengths(
            engine_config,
            missing,
            config.sampling.max_tokens,
            allow_capped=config.allow_capped_output,
        )
        engine = start(engine_config, run / "engine.log", progress)
        result = generate_or_salvage(
            engine,
            config,
            missing,
            (jobs, langs, pairs),
            f"the run stays partial at {run}{{finished}}; {continue_hint(run, manifest)} "
            "once the engine runs",
            progress,
        )
        resumed = build_capture(attempt)
        new_events, new_empty = resumed.table(), len(resumed.empty_steps)
        new_counters = result.counters
        generated = list(result.requests)
    problems = reconcile(new_events, new_counters, new_empty)
    requests = sorted([*kept.requests, *generated], key=lambda r: _order(r.prompt_id, jobs))
    writer.write_requests(requests_table(requests, langs, pairs))
    events = pa.concat_tables([kept.events, new_events])
    write_events(run, events)
    facts: dict[str, Any] = {}
    if engine is not None and result is not None:
        facts = engine_fields(engine.info, result.info)
    capture_dir = attempt if missing else run / CAPTURE
    summary, per_request, _ = record_capture(
        capture_dir,
        resumed or build_capture(capture_dir),
        events,
        reported_per_request(generated),
        new_counters.num_drafts,
    )
    total = kept.counters + new_counters
    write_json_atomic(
        run / METRICS,
        {
            **total.to_json(),
            "source": "vllm (resumed part) + events (salvaged part)",
            "parts": [
                {
                    "source": "events (salvaged from step files: vLLM's counters died)",
                    "requests": sorted(kept.finished),
                    **kept.counters.to_json(),
                },
                {
                    "source": "vllm",
                    "requests": [r.prompt_id for r in generated],
                    **new_counters.to_json(),
                },
            ],
        },
    )
    resumes = [*manifest.get("resumed", [])]
    resumes.append(
        {
            "at": now_iso(),
            "capture": str(attempt.relative_to(run)) if missing else None,
            "salvaged_requests": len(kept.finished),
            "generated_requests": len(generated),
            "salvage_gaps": kept.gaps,
            "events_cut": kept.cut,  # finished, but their step files stopped short: generated again
            "engine_facts": facts or None,  # the resuming engine's own
        }
    )
    # Every field a finished trace has: the original's where it recorded one (a trace
    # salvaged after Ctrl-C, SIGTERM or a death records its engine's facts), else the
    # resuming engine's; capture and per-request figures cover the resumed part.
    inherited = {k: v for k, v in facts.items() if writer.manifest.get(k) is None}
    writer.complete(
        **inherited,
        counters_source="vllm" if not kept.finished else "mixed",
        capture=summary,
        per_request_reconciliation={
            **per_request,
            "scope": "requests generated by the resume (salvaged ones have no vLLM figures)",
        },
        resumed=resumes,
        capture_gaps=kept.gaps,
        timing={
            "wall_seconds": result.wall_seconds if result is not None else None,
            "output_tokens": sum(len(r.output_token_ids) for r in requests),
            "note": "wall_seconds covers the resumed part only",
        },
        reconciliation={
            "exact": not problems,
            "differences": problems,
            "scope": "requests generated by the resume, against that engine's counters; "
            "salvaged requests are rebuilt from their step files and not reconciled "
            "against vLLM's counters (they died with the engine)",
        },
    )
    if problems:
        raise TokenlensError(
            f"events do not match vLLM's counters ({'; '.join(problems)}); run kept at {run}"
        )
    return run


def _resume_served(run: Path, manifest: dict[str, Any], progress: Progress) -> Path:
    """A run against ``vllm serve`` that did not finish: every prompt is sent again.

    Nothing of the failed attempt is kept: the server's counters were differenced around
    the whole attempt (its finished requests have nothing of their own to be reconciled
    against) and its step files are shared with other clients. The attempt is listed
    in the manifest's ``resumed``.
    """
    config = replace(config_from_json(manifest["trace_config"], run), out=run, overwrite=True)
    prompts = select_prompts(read_prompts(config.prompts), config.langs, config.limit)
    history = [*manifest.get("resumed", [])]
    history.append(
        {
            "at": now_iso(),
            "capture": None,
            "salvaged_requests": 0,
            "generated_requests": len(prompts),
            "note": "a run against vllm serve resumes by sending every prompt again",
        }
    )
    return run_trace(config, progress, resumed=history)


def _order(rid: str, jobs: list[PromptJob]) -> int:
    for i, job in enumerate(jobs):
        if job.rid == rid.split("#", 1)[0]:
            return i
    return len(jobs)


def _resumable_manifest(run: Path) -> dict[str, Any]:
    """The manifest of a run that ``--resume`` can continue, or a one-line reason why not."""
    path = run / MANIFEST
    if not path.is_file():
        raise TokenlensError(f"cannot resume {run}: not a run directory ({MANIFEST} is missing)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise TokenlensError(f"cannot resume {run}: unreadable {MANIFEST} ({exc})") from None
    if not isinstance(manifest, dict) or "signature" not in manifest:
        raise TokenlensError(f"cannot resume {run}: {MANIFEST} is not a tokenlens manifest")
    check_readable(manifest, RUN_FORMAT, run)
    if manifest.get("status") == "complete":
        raise TokenlensError(f"{run} is complete: there is nothing to resume")
    if "bench" in manifest:
        raise TokenlensError(f"cannot resume {run}: it is a bench case (use `bench` to resume)")
    if manifest.get("replayed_from"):
        raise TokenlensError(f"cannot resume {run}: it is a replay (replay it again)")
    if not isinstance(manifest.get("trace_config"), dict):
        raise TokenlensError(
            f"cannot resume {run}: it was written by a tokenlens without --resume "
            "(no trace_config in its manifest); trace it again"
        )
    return manifest


def _first_difference(old: str, new: str) -> str:
    a, b = parse_signature(old), parse_signature(new)
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            return f"{key}: run {a.get(key)!r}, now {b.get(key)!r}"
    return "signature differs"
