"""What to run: model, speculative method, sampling. Plain data, no vLLM import.

These objects are what the CLI builds from options and what run directories record in
their manifest, so every field is JSON-serialisable through :func:`dataclasses.asdict`.
What tokenlens knows of each speculative method is in :mod:`tokenlens.engine.methods`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from tokenlens.engine.methods import METHODS
from tokenlens.engine.methods import (  # the method table's; tokenlens.bench.plan reads it here
    METHODS_WITH_DRAFT_MODEL as METHODS_WITH_DRAFT_MODEL,
)

# The environment variable that switches the capture plugin on in every vLLM process and
# names the directory it writes to. The engine sets it; the plugin (one layer above)
# reads it: it lives here so that the engine never imports the capture package.
TRACE_DIR_ENV = "TOKENLENS_TRACE_DIR"
# Opt-in: the plugin also times each model-runner step and its drafting, worker side
# (:mod:`tokenlens.capture.step_timer`), into the trace directory. Bench sets it.
STEP_TIMER_ENV = "TOKENLENS_STEP_TIMER"


@dataclass(frozen=True)
class SpeculativeSpec:
    """A vLLM ``speculative_config``: method, drafter model (if any), k, extra options."""

    method: str
    num_speculative_tokens: int
    model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def to_vllm(self) -> dict[str, Any]:
        """The dict passed as ``LLM(speculative_config=...)``."""
        cfg: dict[str, Any] = {
            "method": self.method,
            "num_speculative_tokens": self.num_speculative_tokens,
        }
        if self.model is not None:
            cfg["model"] = self.model
        known = METHODS.get(self.method)
        cfg.update(known.defaults if known is not None else {})
        cfg.update(self.options)
        return cfg


@dataclass(frozen=True)
class SamplingConfig:
    """Sampling for every request of a run; greedy by default (deterministic traces)."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    logprobs: int | None = None
    ignore_eos: bool = False

    def to_vllm(self, max_tokens: int | None = None) -> dict[str, Any]:
        """Keyword arguments of ``vllm.SamplingParams`` (``max_tokens`` may be per prompt)."""
        return {
            "max_tokens": max_tokens or self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "seed": self.seed,
            "logprobs": self.logprobs,
            "ignore_eos": self.ignore_eos,
        }


@dataclass(frozen=True)
class EngineConfig:
    """How to build the vLLM engine.

    ``None`` fields get platform defaults in the worker: on the CPU build, eager mode
    (torch.compile costs ~2 minutes per start on 2 cores and did not speed up decoding
    here), an explicit KV-cache size (the fraction-of-NUMA-node default failed beside a
    target and drafter here), and OpenMP threads on all cores.
    """

    model: str
    tokenizer: str | None = None
    dtype: str = "auto"
    max_model_len: int = 4096
    speculative: SpeculativeSpec | None = None
    seed: int = 0
    enforce_eager: bool | None = None
    kv_cache_memory_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None
    load_format: str = "auto"
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    # Where the tokenlens plugin records steps (None: the plugin stays inert).
    trace_dir: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PromptJob:
    """One prompt to generate: chat messages (rendered by the model's template) or raw text.

    ``request_id`` (default: the prompt id) is the id vLLM sees; it must be unique
    among the requests of one ``generate`` call.
    """

    prompt_id: str
    messages: list[dict[str, str]] | None
    text: str | None
    max_tokens: int | None
    request_id: str | None = None

    @property
    def rid(self) -> str:
        return self.request_id or self.prompt_id
