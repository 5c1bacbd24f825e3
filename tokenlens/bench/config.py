"""What a bench is asked to do (:class:`BenchConfig`), and what each case runs: its
sampling, its trace configuration (model resolution and manifest, shared with
``tokenlens trace``), its engine and its prompt jobs.

vLLM's prefix cache is off for timing unless the plan turns it on (:func:`engine_config`),
and bench requests never ask for logprobs: both would change what is measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tokenlens.bench.plan import BASELINE, Case, Plan
from tokenlens.bench_results import Row
from tokenlens.engine.config import STEP_TIMER_ENV, EngineConfig, PromptJob, SamplingConfig
from tokenlens.engine.runner import jobs_from_prompts
from tokenlens.trace import TraceConfig, build_engine_config

PREFIX_CACHING = "enable_prefix_caching"  # vLLM's engine argument
# vLLM's plugin filter: an empty value loads no general plugin (``--compare-plain``).
PLUGINS_ENV = "VLLM_PLUGINS"


@dataclass(frozen=True)
class BenchConfig:
    """Where the plan is, where results go, and what to measure against."""

    plan: Path
    out: Path
    server: str | None = None
    server_trace_dir: Path | None = None
    cache: Path | None = None
    restart: bool = False
    argv: tuple[str, ...] = ()
    # Case-id patterns (fnmatch) to run again without the tokenlens plugin; () none.
    compare_plain: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchResult:
    out: Path
    results_csv: Path
    results_md: Path
    rows: list[Row] = field(default_factory=list)
    resumed: int = 0


def sampling_config(plan: Plan) -> SamplingConfig:
    """Bench requests never ask for logprobs: they would cost time being measured."""
    s = plan.sampling
    return SamplingConfig(
        max_tokens=s.max_tokens or 256,
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k,
        seed=s.seed,
        ignore_eos=s.ignore_eos,
    )


def trace_config(plan: Plan, case: Case, out: Path, cache: Path | None) -> TraceConfig:
    """The case as a trace: reuses the trace's model resolution and manifest."""
    m = case.method
    return TraceConfig(
        prompts=case.corpus.path,
        out=out,
        model=case.model.path,
        method=m.method,
        draft_model=m.draft_model,
        k=case.k if m.method != BASELINE else 3,
        spec_options=dict(m.options),
        engine_options=engine_options(case),
        sampling=sampling_config(plan),
        concurrency=case.concurrency,
        max_model_len=case.model.max_model_len,
        dtype=case.model.dtype,
        langs=(case.lang,),
        cap_tokens=plan.sampling.max_tokens,
        chat=plan.chat,
        cache=cache,
        load_format=case.model.load_format,
    )


def engine_options(case: Case) -> dict[str, Any]:
    """The case's vLLM engine arguments: the model's ``engine``, then the method's."""
    return {**case.model.engine, **case.method.engine}


def engine_config(
    plan: Plan, case: Case, trace_dir: Path | None, cache: Path | None
) -> EngineConfig:
    """The engine of ``case`` (shared by every case with the same engine key).

    vLLM's prefix cache is off unless the plan's ``engine`` table turns it on: the
    repeats of a case send the same prompts, and with the cache every repeat after the
    first would skip its prefills, timing something no first request sees. The
    worker-side step timer (:mod:`tokenlens.capture.step_timer`) is on. ``trace_dir``
    None: a *plain* engine, no tokenlens plugin loaded at all (``VLLM_PLUGINS=""``).
    """
    base = build_engine_config(trace_config(plan, case, trace_dir or Path("."), cache))
    extra = {PREFIX_CACHING: False, **engine_options(case)}
    if case.model.quantization is not None:
        extra["quantization"] = case.model.quantization
    env = dict(case.method.env)
    if trace_dir is None:
        env[PLUGINS_ENV] = ""
    else:
        env[STEP_TIMER_ENV] = "1"
    return replace(
        base,
        trace_dir=None if trace_dir is None else str(trace_dir),
        chat_template_kwargs={"enable_thinking": plan.sampling.thinking},
        extra={**base.extra, **extra},
        env={**base.env, **env},
    )


def case_jobs(plan: Plan, case: Case, tag: str, cap: int | None = None) -> list[PromptJob]:
    """The prompt jobs of one pass over ``case`` (request ids tagged ``tag``: w0, r1, ...)."""
    limits = [c for c in (plan.sampling.max_tokens, cap) if c is not None]
    jobs = jobs_from_prompts(list(case.prompts), chat=plan.chat, cap=min(limits, default=None))
    return [replace(j, request_id=f"{case.slug}.{tag}.{j.prompt_id}") for j in jobs]
