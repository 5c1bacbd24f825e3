"""``tokenlens trace``: one generation run written as a run directory.

One module per job: :mod:`~tokenlens.trace.config` (what a run depends on),
:mod:`~tokenlens.trace.models` (model names to directories),
:mod:`~tokenlens.trace.checks` (what is refused before anything starts),
:mod:`~tokenlens.trace.manifest` (the manifest and its signature),
:mod:`~tokenlens.trace.generate` (generate, salvage when the engine dies),
:mod:`~tokenlens.trace.run` (a new run) and :mod:`~tokenlens.trace.resume`
(completing a partial one).

The names below are the package's front door for the CLI, the bench, the demo, the
replay, scripts and benchmarks, which were written against ``tokenlens.trace`` when it
was one module; code inside the package imports from the module that defines a name.
"""

from tokenlens.trace.checks import installed_vllm, precheck_capture, precheck_options
from tokenlens.trace.config import (
    BASELINE,
    DEFAULT_CONCURRENCY,
    StartBackend,
    TraceConfig,
    config_from_json,
    config_to_json,
    select_prompts,
    trace_jobs,
)
from tokenlens.trace.manifest import (
    manifest_for,
    prefix_cache_fields,
    reported_per_request,
    served_manifest,
)
from tokenlens.trace.models import build_engine_config, model_identity
from tokenlens.trace.resume import resume_trace
from tokenlens.trace.run import run_trace

__all__ = [
    "BASELINE",
    "DEFAULT_CONCURRENCY",
    "StartBackend",
    "TraceConfig",
    "build_engine_config",
    "config_from_json",
    "config_to_json",
    "installed_vllm",
    "manifest_for",
    "model_identity",
    "precheck_capture",
    "precheck_options",
    "prefix_cache_fields",
    "reported_per_request",
    "resume_trace",
    "run_trace",
    "select_prompts",
    "served_manifest",
    "trace_jobs",
]
