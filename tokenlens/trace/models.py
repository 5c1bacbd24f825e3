"""Model resolution for a trace: embedded and tiny names to built directories, and the
names a manifest records for them.
"""

from __future__ import annotations

from tokenlens.engine.config import EngineConfig, SpeculativeSpec
from tokenlens.engine.methods import METHODS_WITH_DRAFT_MODEL
from tokenlens.errors import TokenlensError
from tokenlens.models.embedded import DRAFTER, TARGET, lookup
from tokenlens.models.resolve import resolve_model
from tokenlens.models.tiny import TINY_LOAD_FORMAT, TINY_TOKENIZER, draft_load_options, is_tiny
from tokenlens.progress import SILENT, Progress
from tokenlens.trace.config import BASELINE, TraceConfig


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
