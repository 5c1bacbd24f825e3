"""What one traced run depends on: :class:`TraceConfig`, the prompts it selects and the
jobs it sends, and the JSON form ``trace --resume`` reads back from the manifest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from tokenlens.engine.backend import Backend
from tokenlens.engine.config import (
    EngineConfig,
    PromptJob,
    SamplingConfig,
)
from tokenlens.engine.runner import (
    jobs_from_prompts,
)
from tokenlens.engine.server import ServerTimeouts
from tokenlens.errors import TokenlensError
from tokenlens.progress import Progress
from tokenlens.prompts import Prompt, normalise_lang

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
