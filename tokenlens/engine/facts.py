"""How the engine really ran, read from vLLM itself: the manifest's ``engine`` object.

:func:`config_facts` reads a resolved ``VllmConfig`` (in the engine worker, or in the
plugin's scheduler process for ``vllm serve``); :class:`EngineFactsExtension` reports
each worker's model runner, drafter and device; :func:`merge_facts` joins the two (what
could not be read is null with its reason under ``unavailable``); :func:`resolve_method`
builds the config vLLM would for a method on stand-in models (``doctor``). No vLLM
import at module level (vLLM's workers import the extension; the CLI never imports
vLLM). Fields and why they are recorded: docs/capture.md, "What the manifest records".
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# The worker extension vLLM injects into its worker class (``worker_extension_cls``).
EXTENSION = "tokenlens.engine.facts.EngineFactsExtension"
# The collective_rpc method the extension adds (also the only attribute it may define:
# vLLM refuses an extension whose attributes clash with the worker's).
RPC_METHOD = "tokenlens_engine_facts"
V1, V2 = "V1", "V2"
# vLLM's V1 GPU model runner module; releases that removed V1 (0.34) lack it.
V1_RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"


def _qualname(obj: Any) -> str | None:
    if obj is None:
        return None
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _dtype(value: Any) -> str | None:
    return None if value is None else str(value).removeprefix("torch.")


def _cpu_name() -> str | None:
    """The CPU's model name (``/proc/cpuinfo``), for a CPU engine's ``device.name``."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or None


def runner_from_config(vllm_config: Any) -> tuple[str | None, str]:
    """(``V1`` | ``V2`` | None, how it was decided) for a resolved ``VllmConfig``.

    vLLM 0.32/0.33 decide in ``VllmConfig.use_v2_model_runner`` (a property: Triton,
    supported features, ``VLLM_USE_V2_MODEL_RUNNER``); older releases read only that
    environment variable; 0.34 removed the V1 runner (its module is gone).
    """
    if hasattr(type(vllm_config), "use_v2_model_runner"):
        try:
            return (V2 if vllm_config.use_v2_model_runner else V1), "VllmConfig.use_v2_model_runner"
        except Exception as exc:  # the property may raise on a contradictory setting
            return None, f"VllmConfig.use_v2_model_runner raised {type(exc).__name__}: {exc}"
    try:
        has_v1 = importlib.util.find_spec(V1_RUNNER_MODULE) is not None
    except (ImportError, ValueError):
        has_v1 = True
    if not has_v1:
        return V2, f"{V1_RUNNER_MODULE} does not exist in this vLLM (V1 removed)"
    try:
        import vllm.envs as envs

        flag = getattr(envs, "VLLM_USE_V2_MODEL_RUNNER", None)
    except Exception:
        flag = None
    if flag is None:
        return V1, "this vLLM has no V2 model runner switch"
    return (V2 if flag else V1), "VLLM_USE_V2_MODEL_RUNNER"


def _device(vllm_config: Any) -> dict[str, Any]:
    """Device type, name and counts as vLLM's platform reports them for this process
    (NVML on CUDA; never creates a CUDA context)."""
    out: dict[str, Any] = {"type": None, "name": None, "used": None, "visible": None}
    parallel = getattr(vllm_config, "parallel_config", None)
    sizes = [
        getattr(parallel, name, None)
        for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
    ]
    counts = [s for s in sizes if isinstance(s, int)]
    if len(counts) == len(sizes):
        out["used"] = counts[0] * counts[1] * counts[2]
    try:
        from vllm.platforms import current_platform

        out["type"] = str(current_platform.device_type) or None
        if current_platform.is_cpu():
            out["name"] = _cpu_name()
        else:
            out["name"] = str(current_platform.get_device_name(0))
        out["visible"] = int(current_platform.device_count())
    except Exception:
        pass
    return out


def config_facts(vllm_config: Any) -> dict[str, Any]:
    """The ``engine`` facts a resolved ``VllmConfig`` holds (no worker needed)."""
    model = getattr(vllm_config, "model_config", None)
    scheduler = getattr(vllm_config, "scheduler_config", None)
    spec = getattr(vllm_config, "speculative_config", None)
    parallel = getattr(vllm_config, "parallel_config", None)
    runner, runner_source = runner_from_config(vllm_config)
    per_batch = getattr(spec, "num_speculative_tokens_per_batch_size", None)
    facts: dict[str, Any] = {
        "model_runner": runner,
        "model_runner_source": runner_source,
        "model_runner_class": None,
        "async_scheduling": _bool(getattr(scheduler, "async_scheduling", None)),
        "speculative_method": getattr(spec, "method", None),
        "num_speculative_tokens": getattr(spec, "num_speculative_tokens", None),
        # vLLM's dynamic speculative decoding: k chosen per step from the batch size.
        "dynamic_k": per_batch if per_batch else None,
        # the drafter's options as vLLM resolved them (its defaults included), e.g.
        # n-gram's prompt_lookup_min/max, which a user who gave none never sees otherwise
        "speculative_options": _spec_options(spec),
        "drafter_class": None,
        "dtype": _dtype(getattr(model, "dtype", None)),
        "quantization": getattr(model, "quantization", None),
        "device": _device(vllm_config),
        "cuda_version": _cuda_version(),
        "parallel": {
            "tensor": getattr(parallel, "tensor_parallel_size", None),
            "pipeline": getattr(parallel, "pipeline_parallel_size", None),
            "data": getattr(parallel, "data_parallel_size", None),
        },
    }
    return facts


SPEC_OPTION_FIELDS = (
    "prompt_lookup_min",
    "prompt_lookup_max",
    "draft_tensor_parallel_size",
    "disable_padded_drafter_batch",
    "enforce_eager",
    "parallel_drafting",
)


def _spec_options(spec: Any) -> dict[str, Any] | None:
    """The resolved values of the speculative config's option fields vLLM has (plain data)."""
    if spec is None:
        return None
    out: dict[str, Any] = {}
    for name in SPEC_OPTION_FIELDS:
        value = getattr(spec, name, None)
        if isinstance(value, bool | int | float | str):
            out[name] = value
    return out


def _bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _cuda_version() -> str | None:
    """The CUDA version torch was built with (None on a CPU build)."""
    try:
        import torch

        version = torch.version.cuda
    except Exception:
        return None
    return str(version) if version else None


class EngineFactsExtension:
    """vLLM worker extension (``worker_extension_cls``): one ``collective_rpc`` method
    reporting this worker's facts. Must define nothing else (vLLM refuses an extension
    attribute the worker already has)."""

    def tokenlens_engine_facts(self) -> dict[str, Any]:
        """Model runner, drafter and device of this worker, as plain JSON values."""
        worker: Any = self
        runner = getattr(worker, "model_runner", None)
        drafter = None
        for attr in ("drafter", "speculator"):  # V1 runner, V2 runner
            drafter = getattr(runner, attr, None)
            if drafter is not None:
                break
        label = getattr(worker, "use_v2_model_runner", None)
        device = getattr(worker, "device", None)
        device_type = getattr(device, "type", None)
        name: str | None = None
        if device_type == "cuda":
            try:
                import torch

                name = str(torch.cuda.get_device_name(device))
            except Exception:
                name = None
        elif device_type == "cpu":
            name = _cpu_name()
        return {
            "rank": getattr(worker, "rank", None),
            "model_runner": None if label is None else (V2 if label else V1),
            "model_runner_class": _qualname(runner),
            "drafter_class": _qualname(drafter),
            "device_type": device_type,
            "device_name": name,
            "cuda_version": _cuda_version(),
        }


def merge_facts(
    config: dict[str, Any],
    workers: Iterable[dict[str, Any]] | None,
    why_no_workers: str | None = None,
    source: str = "engine",
) -> dict[str, Any]:
    """Config facts completed by the workers' live facts (which win where both exist).

    ``workers`` None: they could not be asked (``why_no_workers`` says why); the
    fields only a worker knows stay null and ``unavailable`` names them.
    """
    facts = {**config, "source": source}
    unavailable: dict[str, str] = {}
    reports = list(workers or [])
    if reports:
        first = reports[0]
        runners = {r.get("model_runner") for r in reports} - {None}
        if len(runners) == 1:
            facts["model_runner"] = runners.pop()
            facts["model_runner_source"] = "the engine's workers"
        facts["model_runner_class"] = first.get("model_runner_class")
        facts["drafter_class"] = first.get("drafter_class")
        names = sorted({str(r["device_name"]) for r in reports if r.get("device_name")})
        device = dict(facts.get("device") or {})
        if names:
            device["name"] = names[0] if len(names) == 1 else names
        device["workers"] = len(reports)
        facts["device"] = device
        facts["cuda_version"] = first.get("cuda_version") or facts.get("cuda_version")
        if facts.get("speculative_method") and facts["drafter_class"] is None:
            unavailable["drafter_class"] = "the worker's model runner has no drafter attribute"
    else:
        why = why_no_workers or "the workers were not asked"
        for key in ("model_runner_class", "drafter_class"):
            unavailable[key] = why
    if facts.get("speculative_method") is None:
        facts["drafter_class"] = None
        unavailable.pop("drafter_class", None)
    if facts.get("model_runner") is None:
        unavailable.setdefault("model_runner", str(facts.get("model_runner_source")))
    facts["unavailable"] = unavailable
    return facts


def engine_facts(llm: Any) -> dict[str, Any]:
    """The ``engine`` facts of a running ``vllm.LLM`` (in the tokenlens engine worker)."""
    config = llm.llm_engine.vllm_config
    facts = config_facts(config)
    parallel = getattr(config, "parallel_config", None)
    if getattr(parallel, "worker_extension_cls", None) != EXTENSION:
        return merge_facts(
            facts, None, "the engine runs another worker_extension_cls (an engine option)"
        )
    try:
        workers = llm.collective_rpc(RPC_METHOD, timeout=60)
    except Exception as exc:  # never fail a run over its description
        text = " ".join(str(exc).split())[:200]
        return merge_facts(facts, None, f"collective_rpc failed: {type(exc).__name__}: {text}")
    return merge_facts(facts, workers)


def extension_kwargs(extra: dict[str, Any]) -> dict[str, Any]:
    """``LLM`` keyword arguments that install the extension, unless the user set their own."""
    if extra.get("worker_extension_cls"):
        return {}
    return {"worker_extension_cls": EXTENSION}


def resolve_method(method: str, k: int = 3) -> dict[str, Any]:
    """vLLM's resolved config facts for ``method`` on this machine, on stand-in models.

    Builds the ``VllmConfig`` an engine would on the stand-ins of
    :data:`tokenlens.engine.methods.METHODS` (only their config.json is written, nothing
    is loaded). Raises ``KeyError`` for a method without a stand-in and whatever vLLM
    raises for a config it refuses.
    """
    import json
    import tempfile

    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig, VllmConfig

    from tokenlens.engine.methods import METHODS
    from tokenlens.models.tiny import TINY_CONFIGS

    row = METHODS.get(method)
    if row is None or row.stand_in is None:
        raise KeyError(method)
    target, drafter = row.stand_in
    with tempfile.TemporaryDirectory(prefix="tokenlens-stand-in-") as tmp:
        dirs = {}
        for name in {target, drafter} - {None}:
            assert name is not None
            directory = Path(tmp) / name
            directory.mkdir()
            (directory / "config.json").write_text(json.dumps(TINY_CONFIGS[name]), "utf-8")
            dirs[name] = str(directory)
        model = ModelConfig(model=dirs[target], skip_tokenizer_init=True, max_model_len=1024)
        parallel = ParallelConfig()
        spec: dict[str, Any] = {"method": method, "num_speculative_tokens": k}
        if drafter is not None:
            spec["model"] = dirs[drafter]
        spec.update(row.defaults)
        speculative = SpeculativeConfig(
            **spec, target_model_config=model, target_parallel_config=parallel
        )
        config = VllmConfig(
            model_config=model, parallel_config=parallel, speculative_config=speculative
        )
        return config_facts(config)
