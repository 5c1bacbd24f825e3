"""A trace's manifest: the fields and the signature that say what a run directory holds."""

from __future__ import annotations

import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from tokenlens import __version__
from tokenlens.capture.summary import served_engine_facts, with_parallel_seen
from tokenlens.engine.options import (
    options_label,
)
from tokenlens.engine.runner import (
    effective_max_tokens,
)
from tokenlens.engine.server import ServerClient
from tokenlens.models.embedded import DRAFTER, EMBEDDED
from tokenlens.prompts import Prompt, corpus_hash
from tokenlens.rundir import (
    now_iso,
)
from tokenlens.signature import make_signature, sampling_label
from tokenlens.trace.config import BASELINE, TraceConfig, config_to_json
from tokenlens.trace.models import model_identity


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


def engine_fields(
    backend_info: dict[str, Any], result_info: dict[str, Any], capture: Path | None = None
) -> dict[str, Any]:
    """What the engine that generated says about itself, as manifest fields: ``dtype``,
    ``engine`` (vLLM's resolved config; a server's from its capture status), and the
    run's ``num_preemptions`` and ``prefix_cache`` where reported. One builder for a
    finished trace, a salvaged one and a resumed one, so none of them loses a field."""
    fields: dict[str, Any] = {k: result_info[k] for k in ("num_preemptions",) if k in result_info}
    fields.update(prefix_cache_fields(result_info))
    fields.update({k: backend_info[k] for k in ("dtype",) if k in backend_info})
    engine = backend_info.get("engine")
    if engine is None and capture is not None:
        engine = served_engine_facts(capture)
    if engine is not None and capture is not None:
        engine = with_parallel_seen(engine, capture)  # the ranks and cores that recorded
    fields["engine"] = engine
    return fields


def reported_per_request(requests: Any) -> dict[str, dict[str, Any]]:
    """Run request id -> vLLM's per-request spec-decode metrics, where reported."""
    return {r.prompt_id: r.spec_decode for r in requests if r.spec_decode}
