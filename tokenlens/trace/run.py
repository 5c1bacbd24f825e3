"""``tokenlens trace``: one generation run, with a local engine or against ``vllm serve``,
written as a run directory.
"""

from __future__ import annotations

import secrets
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenlens.capture.layout import options_refusal
from tokenlens.engine.backend import Backend
from tokenlens.engine.config import (
    PromptJob,
)
from tokenlens.engine.options import (
    check_engine_options,
    installed_engine_arguments,
)
from tokenlens.engine.runner import (
    Engine,
    capped_by_model_len,
    capped_note,
    check_prompt_lengths,
    jobs_from_prompts,
)
from tokenlens.engine.server import ServerClient
from tokenlens.errors import TokenlensError, os_error_line
from tokenlens.progress import SILENT, Progress
from tokenlens.prompts import Prompt, read_prompts
from tokenlens.rundir import (
    CAPTURE,
    RunWriter,
    continue_hint,
    finalize,
    requests_table,
)
from tokenlens.trace.checks import installed_vllm, precheck_capture, precheck_options
from tokenlens.trace.config import StartBackend, TraceConfig, select_prompts, trace_jobs
from tokenlens.trace.generate import generate_or_salvage, note_lost_identities
from tokenlens.trace.manifest import (
    engine_fields,
    manifest_for,
    reported_per_request,
    served_manifest,
)
from tokenlens.trace.models import build_engine_config


@dataclass
class _Traced:
    """What differs between tracing with a local engine and against ``vllm serve``."""

    backend: Backend
    jobs: list[PromptJob]
    manifest: dict[str, Any]
    capture: Path  # where the plugin's step files are
    id_map: dict[str, str] | None = None  # None: the worker's submitted-*.jsonl
    keep: set[str] | None = None
    start: str | None = None  # the progress stage of starting the backend
    mismatch: str = "vLLM's counters"  # whose counters a failed reconciliation names
    kept: str = "; run kept at"  # what to suspect when they differ, and where the run is
    # Refuse a run whose capture state is bad (a server's trace directory is shared,
    # so its status files may be other runs').
    strict_capture: bool = True
    # The capture directory is this run's own: emptied first, and salvaged into an
    # analysable partial run if the backend dies (a server's is shared: neither).
    own_capture: bool = True


def _local(
    config: TraceConfig, prompts: list[Prompt], progress: Progress, start: StartBackend = Engine
) -> _Traced:
    """A vLLM engine in a worker subprocess, recording into ``out/capture/``."""
    vllm_version = installed_vllm()  # before minutes of model building, not after
    check_engine_options(config.engine_options, installed_engine_arguments())
    if (why := options_refusal(config.engine_options)) is not None:
        raise TokenlensError(f"--engine-option {why}")
    precheck_capture(config, progress)
    jobs = trace_jobs(config, prompts)
    RunWriter.check_free(config.out, config.overwrite)
    capture_dir = config.out / CAPTURE
    engine_config = replace(build_engine_config(config, progress), trace_dir=str(capture_dir))
    progress.stage("check prompt lengths")
    lengths = check_prompt_lengths(
        engine_config, jobs, config.sampling.max_tokens, allow_capped=config.allow_capped_output
    )
    note = capped_note(
        capped_by_model_len(lengths, jobs, config.sampling.max_tokens, engine_config.max_model_len),
        engine_config.max_model_len,
    )
    if note:
        progress.note(note)
    manifest = manifest_for(config, prompts, vllm_version)
    engine = start(engine_config, config.out / "engine.log", progress)
    return _Traced(engine, jobs, manifest, capture_dir, start="start the vLLM engine")


def _served(config: TraceConfig, prompts: list[Prompt], progress: Progress) -> _Traced:
    """A running ``vllm serve`` whose plugin records into ``--server-trace-dir``.

    Request ids carry a per-run nonce so that the server's trace directory may hold
    other runs; vLLM's counters are differenced around the run, so they are exact only
    if no other client uses the server meanwhile (the reconciliation says so if not).
    """
    assert config.server is not None
    if config.engine_options:
        raise TokenlensError(
            "--engine-option configures the engine tokenlens starts; a `vllm serve` runs "
            "with the engine arguments it was started with"
        )
    if config.server_trace_dir is None:
        raise TokenlensError(
            "--server needs --server-trace-dir: where the server's TOKENLENS_TRACE_DIR is visible"
        )
    RunWriter.check_free(config.out, config.overwrite)
    client = ServerClient(
        config.server, timeouts=config.server_timeouts, stream=True, progress=progress
    )
    manifest = served_manifest(config, prompts, client, config.server, config.server_trace_dir)
    nonce = secrets.token_hex(4)
    jobs = [
        replace(job, request_id=f"tl{nonce}-{job.prompt_id}")
        for job in jobs_from_prompts(
            prompts, chat=True, cap=config.cap_tokens, default=config.sampling.max_tokens
        )
    ]
    id_map = {job.rid: job.prompt_id for job in jobs}
    return _Traced(
        client,
        jobs,
        manifest,
        config.server_trace_dir,
        id_map=id_map,
        keep=set(id_map.values()),
        mismatch="the server's counters",
        kept="; was another client using the server? Run kept at",
        strict_capture=False,
        own_capture=False,
    )


def run_trace(
    config: TraceConfig,
    progress: Progress = SILENT,
    start: StartBackend = Engine,
    resumed: list[dict[str, Any]] | None = None,
) -> Path:
    """Generate every selected prompt and write the run directory ``config.out``.

    With a local engine, every prompt is measured with the target's tokenizer before
    the engine starts (:func:`check_prompt_lengths`) and the plugin records into
    ``out/capture/``; with ``config.server`` the requests go to a running ``vllm
    serve`` whose plugin records into ``config.server_trace_dir``. Either way the steps
    become ``events.parquet`` and are reconciled with vLLM's counters
    (:func:`tokenlens.rundir.finalize`). If a local engine dies, whatever was recorded
    is still written, and the run is marked ``partial``; :func:`resume_trace`
    completes it. ``start`` makes the local backend (:data:`StartBackend`); ``resumed``
    is the manifest's history of earlier attempts (a served run resumed).
    """
    precheck_options(config)
    prompts = select_prompts(read_prompts(config.prompts), config.langs, config.limit)
    if config.server is not None:
        traced = _served(config, prompts, progress)
    else:
        traced = _local(config, prompts, progress, start)
    if resumed:
        traced.manifest["resumed"] = resumed
    writer = RunWriter(config.out, traced.manifest, config.overwrite)
    try:
        return _trace_into(writer, traced, config, prompts, progress)
    except OSError as exc:  # a full disk, a permission: one line, and the run stays resumable
        raise TokenlensError(
            f"{os_error_line(exc)} — {config.out} stays partial; "
            f"{continue_hint(config.out, writer.manifest)}"
        ) from None
    finally:
        writer.release()


def _trace_into(
    writer: RunWriter,
    traced: _Traced,
    config: TraceConfig,
    prompts: list[Prompt],
    progress: Progress,
) -> Path:
    """Generate into the locked, ``partial`` run directory of ``writer`` and finish it."""
    if traced.own_capture:
        shutil.rmtree(traced.capture, ignore_errors=True)
    langs = {p.id: p.lang for p in prompts}
    pairs = {p.id: p.pair for p in prompts}
    result = generate_or_salvage(
        traced.backend,
        config,
        traced.jobs,
        (traced.jobs, langs, pairs) if traced.own_capture else None,
        f"{'partial run written to' if traced.own_capture else 'the run stays partial at'} "
        f"{config.out}{{finished}}; {continue_hint(config.out, writer.manifest)}",
        progress,
        traced.start,
    )
    done = finalize(
        writer,
        requests_table(list(result.requests), langs, pairs),
        counters=result.counters,
        capture=traced.capture,
        id_map=traced.id_map,
        keep=traced.keep,
        reported=reported_per_request(result.requests),
        extra_manifest={
            "vllm_version": result.vllm_version,
            "timing": {
                "wall_seconds": result.wall_seconds,
                "output_tokens": sum(len(r.output_token_ids) for r in result.requests),
            },
            **engine_fields(traced.backend.info, result.info, traced.capture),
        },
        live=not traced.own_capture,  # a server's engine runs on: wait for its writer
    )
    summary = writer.manifest["capture"]
    note_lost_identities(summary, progress)
    if done.problems:
        raise TokenlensError(
            f"events do not match {traced.mismatch} ({'; '.join(done.problems)}){traced.kept} "
            f"{config.out}"
        )
    if traced.strict_capture and done.capture_problem is not None:
        raise TokenlensError(f"{done.capture_problem}; run kept at {config.out}")
    return config.out
