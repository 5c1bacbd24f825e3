"""The vLLM general plugin: wrap the scheduler's reconciliation of drafts and samples.

Contact surface with vLLM (checked before patching; anything missing -> one error
line in vLLM's log and vLLM is left untouched):

- ``vllm.v1.core.sched.scheduler.Scheduler.update_from_output(scheduler_output,
  model_runner_output)``: the one place that sees, per request and step, the
  scheduled drafts (``scheduler_output.scheduled_spec_decode_tokens``) and the tokens
  that came out of the rejection sampler (``model_runner_output.sampled_token_ids``
  via ``req_id_to_index``). It is the same for every model runner, device and front end.
- ``Scheduler.make_spec_decoding_stats(stats, num_draft_tokens, num_accepted_tokens,
  num_invalid_spec_tokens, request_id)``: called by ``update_from_output`` exactly when
  vLLM counts a verification step. Recording there (rather than re-deriving vLLM's
  conditions) makes our totals equal vLLM's counters by construction of the same call.
- ``Scheduler.requests[req_id].output_token_ids``: its length before and after the
  step gives where the step's tokens landed and how many survived a stop.

Nothing happens unless ``TOKENLENS_TRACE_DIR`` is set. Errors inside the recorder
disable tracing (logged once) and never propagate into vLLM.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
from typing import Any

from tokenlens.capture import TRACE_DIR_ENV
from tokenlens.capture.recorder import StepRecorder

SUPPORTED_VLLM = ("0.32.0",)
_PATCH_MARK = "__tokenlens_original__"
logger = logging.getLogger("tokenlens.capture")

_STATS_PARAMS = (
    "spec_decoding_stats",
    "num_draft_tokens",
    "num_accepted_tokens",
    "num_invalid_spec_tokens",
    "request_id",
)


def register() -> None:
    """Entry point (``vllm.general_plugins``): install the hook if asked to."""
    directory = os.environ.get(TRACE_DIR_ENV)
    if not directory:
        return
    try:
        problem = install(directory)
    except Exception as exc:  # never break vLLM start-up
        problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:
        _vllm_logger().error("tokenlens: tracing disabled, vLLM left untouched: %s", problem)


def _vllm_logger() -> logging.Logger:
    try:
        from vllm.logger import init_logger

        return init_logger("tokenlens.capture")
    except Exception:
        return logger


def check_compatibility() -> tuple[Any, str | None]:
    """(Scheduler class, None) if this vLLM has the surface we hook, else (None, why)."""
    import vllm

    if vllm.__version__ not in SUPPORTED_VLLM:
        return None, f"vLLM {vllm.__version__} is not supported (supported: {SUPPORTED_VLLM})"
    from vllm.v1.core.sched.scheduler import Scheduler

    for name in ("update_from_output", "make_spec_decoding_stats", "requests"):
        if name != "requests" and not callable(getattr(Scheduler, name, None)):
            return None, f"Scheduler.{name} is missing"
    params = tuple(inspect.signature(Scheduler.make_spec_decoding_stats).parameters)[1:]
    if params != _STATS_PARAMS:
        return None, f"Scheduler.make_spec_decoding_stats has parameters {params}"
    params = tuple(inspect.signature(Scheduler.update_from_output).parameters)[1:]
    if params != ("scheduler_output", "model_runner_output"):
        return None, f"Scheduler.update_from_output has parameters {params}"
    return Scheduler, None


def install(directory: str) -> str | None:
    """Patch the scheduler once per process; return why not, or None on success."""
    scheduler_cls, problem = check_compatibility()
    if problem is not None:
        return problem
    if hasattr(scheduler_cls.update_from_output, _PATCH_MARK):
        return None  # plugins load more than once per process
    hook = _Hook(StepRecorder(directory))
    scheduler_cls.update_from_output = hook.wrap_update(scheduler_cls.update_from_output)
    scheduler_cls.make_spec_decoding_stats = hook.wrap_stats(scheduler_cls.make_spec_decoding_stats)
    return None


def uninstall() -> None:
    """Restore the original methods (tests)."""
    from vllm.v1.core.sched.scheduler import Scheduler

    for name in ("update_from_output", "make_spec_decoding_stats"):
        original = getattr(getattr(Scheduler, name), _PATCH_MARK, None)
        if original is not None:
            setattr(Scheduler, name, original)


class _Hook:
    """Per-process state: the recorder and the step being reconciled."""

    def __init__(self, recorder: StepRecorder) -> None:
        self.recorder = recorder
        self.enabled = True
        # request id -> record of the step in progress (None outside update_from_output)
        self.step: dict[str, dict[str, Any]] | None = None
        self.context: tuple[Any, Any] | None = None

    def _disable(self, exc: BaseException) -> None:
        self.enabled = False
        _vllm_logger().error("tokenlens: tracing stopped after an error: %r", exc)

    def wrap_update(self, original: Any) -> Any:
        @functools.wraps(original)
        def update_from_output(sched: Any, scheduler_output: Any, model_runner_output: Any) -> Any:
            if not self.enabled:
                return original(sched, scheduler_output, model_runner_output)
            try:
                self._begin(sched, scheduler_output, model_runner_output)
            except Exception as exc:
                self._disable(exc)
            try:
                return original(sched, scheduler_output, model_runner_output)
            finally:
                if self.enabled:
                    try:
                        self._end()
                    except Exception as exc:
                        self._disable(exc)
                self.step = None
                self.context = None

        setattr(update_from_output, _PATCH_MARK, original)
        return update_from_output

    def wrap_stats(self, original: Any) -> Any:
        signature = inspect.signature(original)

        @functools.wraps(original)
        def make_spec_decoding_stats(sched: Any, *args: Any, **kwargs: Any) -> Any:
            if self.enabled and self.step is not None:
                try:
                    bound = signature.bind(sched, *args, **kwargs)
                    self._spec(bound.arguments)
                except Exception as exc:
                    self._disable(exc)
            return original(sched, *args, **kwargs)

        setattr(make_spec_decoding_stats, _PATCH_MARK, original)
        return make_spec_decoding_stats

    # -- the three moments of a step ------------------------------------------------
    def _begin(self, sched: Any, scheduler_output: Any, model_runner_output: Any) -> None:
        """Before vLLM appends anything: where each request's new tokens will land."""
        sampled = model_runner_output.sampled_token_ids
        step: dict[str, dict[str, Any]] = {}
        if sampled:
            for req_id, index in model_runner_output.req_id_to_index.items():
                request = sched.requests.get(req_id)
                generated = sampled[index] if index < len(sampled) else None
                if request is None or not generated:
                    continue
                step[req_id] = {
                    "r": req_id,
                    "b": len(request.output_token_ids),
                    "g": [int(t) for t in generated],
                    "_req": request,
                }
        self.step = step
        self.context = (scheduler_output, model_runner_output)

    def _spec(self, args: dict[str, Any]) -> None:
        """vLLM is counting one verification step of one request: record its drafts."""
        assert self.step is not None and self.context is not None
        req_id = args["request_id"]
        scheduler_output, _ = self.context
        drafts = scheduler_output.scheduled_spec_decode_tokens.get(req_id) or []
        invalid = args["num_invalid_spec_tokens"] or {}
        record = self.step.get(req_id)
        if record is None:  # counted by vLLM with no sampled tokens (no sampler step)
            record = self.step[req_id] = {"r": req_id, "b": None, "g": [], "_req": None}
        record["d"] = [int(t) for t in drafts]
        record["a"] = int(args["num_accepted_tokens"])
        record["i"] = int(invalid.get(req_id, 0))

    def _end(self) -> None:
        """After vLLM appended: how many of the sampled tokens survived stop checks."""
        assert self.step is not None
        records = []
        for record in self.step.values():
            request = record.pop("_req")
            if request is not None and record["b"] is not None:
                record["n"] = len(request.output_token_ids) - record["b"]
            else:
                record["n"] = 0
            if record["n"] or "d" in record:
                records.append(record)
        if records:
            self.recorder.write_step(records)
