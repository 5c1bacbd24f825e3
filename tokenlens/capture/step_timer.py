"""Opt-in, worker-side timing of each model-runner step and of its drafting.

vLLM (0.25 to 0.32 at least) keeps no per-step draft timing of its own, so a
speculative case that is slower than its baseline cannot say *why* from vLLM's
counters. With ``TOKENLENS_STEP_TIMER`` set beside ``TOKENLENS_TRACE_DIR``, the plugin
wraps, in the process that runs the model:

- V1 runner (``vllm.v1.worker.gpu_model_runner.GPUModelRunner``; the CPU runner
  subclasses it): ``execute_model`` (the step starts) and ``sample_tokens`` (it ends:
  sampling, drafting and bookkeeping happen there), and ``propose_draft_token_ids``
  (drafting), which ``sample_tokens`` calls on ``self``;
- V2 runner (``vllm.v1.worker.gpu.model_runner.GPUModelRunner``): the same two step
  methods, and the runner's ``speculator.propose`` on the instance (its first step).

Under tensor parallelism only the engine's one writer rank times
(:func:`tokenlens.capture.layout.writer_ranks`; the others say ``idle`` in their status).
Each step becomes one line of ``steptimes-<tag>.jsonl`` in the trace directory
(:class:`~tokenlens.capture.recorder.StepRecorder`'s format, one record)::

    {"seq": 7, "t": 1764.5, "reqs": [{"s": 0.052, "d": 0.046, "src": "cuda",
      "tok": 4, "r": 1, "sd": 3, "o": 3.1e-05}]}

``s`` the step's seconds, ``d`` drafting's (null: no drafting in that step), ``src``
``cuda`` (CUDA events recorded on the runner's stream and read later on the writer
thread: the runner never synchronises for them) or ``cpu`` (``perf_counter``), ``tok``
/ ``r`` / ``sd`` the scheduled tokens, requests and draft tokens (``tok == r + sd``: a
step of decodes only), ``o`` the timer's own seconds on the runner's thread.

The surface is checked first (the methods exist, and the step method calls the
drafting one as assumed); if it changed, nothing is wrapped (or only the steps, with
drafting unavailable) and ``steptimer-<tag>.json`` says why. Errors at run
time stop the timer, never vLLM. Nothing here imports vLLM or torch at module level.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from tokenlens.capture.layout import IDLE, runner_parallel_config, writer_ranks
from tokenlens.capture.recorder import StepRecorder, write_json_status

V1_MODULE = "vllm.v1.worker.gpu_model_runner"
V2_MODULE = "vllm.v1.worker.gpu.model_runner"
TIMES_PREFIX = "steptimes"
STATUS_PREFIX = "steptimer"  # tokenlens.capture.summary.TIMER_STATUS_GLOB reads these
STEP_METHODS = ("execute_model", "sample_tokens")
# How the step method reaches the drafter, per runner: (method name, call text).
DRAFT_CALLS = {
    V1_MODULE: ("propose_draft_token_ids", "self.propose_draft_token_ids("),
    V2_MODULE: ("speculator.propose", "self.speculator.propose("),
}
_MARK = "__tokenlens_timer_original__"
logger = logging.getLogger("tokenlens.capture")


def surface(module_name: str, runner_cls: type) -> tuple[list[str], str | None]:
    """(problems that forbid timing steps, why drafting cannot be timed or None)."""
    problems = [m for m in STEP_METHODS if not callable(getattr(runner_cls, m, None))]
    if problems:
        return [f"{runner_cls.__qualname__} lacks {', '.join(problems)}"], None
    name, call = DRAFT_CALLS[module_name]
    if module_name == V1_MODULE and not callable(getattr(runner_cls, name, None)):
        return [], f"{runner_cls.__qualname__}.{name} is missing"
    sample: Any = runner_cls.__dict__.get("sample_tokens") or getattr(runner_cls, STEP_METHODS[1])
    try:
        source = inspect.getsource(getattr(sample, _MARK, sample))
    except (OSError, TypeError):
        return [], "sample_tokens has no readable source"
    if call not in source:
        return [], f"sample_tokens no longer calls {call.rstrip('(')}"
    return [], None


class _Step:
    """The step being timed (runner thread only)."""

    __slots__ = ("draft_events", "draft_s", "events", "own", "r", "sd", "t0", "tok")

    def __init__(self) -> None:
        self.t0 = 0.0
        self.events: list[Any] = []
        self.draft_s: float | None = None
        self.draft_events: list[tuple[Any, Any]] = []
        self.own = 0.0
        self.tok = self.r = self.sd = 0


class StepTimer:
    """Per-process state: the recorder, the open step, the device kind."""

    def __init__(self, directory: str | Path, runner: str, draft_problem: str | None) -> None:
        self.directory = Path(directory)
        self.recorder = StepRecorder(directory, prefix=TIMES_PREFIX)
        self.runner = runner
        self.draft_problem = draft_problem
        self.enabled = True
        self.step: _Step | None = None
        self.cuda: bool | None = None  # decided on the first step from runner.device
        self.wrapped_speculator = False
        self.in_sample = False  # inside the step's sample_tokens (drafting counts there)

    def status(self, data: dict[str, Any]) -> None:
        write_json_status(self.directory, STATUS_PREFIX, {"runner": self.runner, **data})

    def stop(self, exc: BaseException) -> None:
        self.enabled = False
        self.step = None
        self.status({"state": "failed", "problem": repr(exc)})
        _vllm_logger().error("tokenlens: step timer stopped: %r", exc)

    def _event(self) -> Any:
        """A CUDA event recorded on the current stream."""
        import torch

        event = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        event.record()
        return event

    def _capturing(self) -> bool:
        """Whether a CUDA graph is being captured now (nothing is timed then)."""
        if not self.cuda:
            return False
        import torch

        return bool(torch.cuda.is_current_stream_capturing())

    # -- the step ---------------------------------------------------------------------
    def begin(self, runner: Any, scheduler_output: Any) -> None:
        t0 = time.perf_counter()
        if self.cuda is None:
            self.cuda = getattr(getattr(runner, "device", None), "type", None) == "cuda"
            writes, ranks = writer_ranks(runner_parallel_config(runner))
            if not writes:  # another rank times this engine's steps (or none may)
                self.enabled = False
                problem = ranks.get("problem")
                self.status({"state": "refused", "problem": problem} if problem else
                            {"state": IDLE, "ranks": ranks})  # fmt: skip
                return
            self.status(
                {"state": "timing", "source": "cuda" if self.cuda else "cpu",
                 "draft": self.draft_problem or "timed", "ranks": ranks}
            )  # fmt: skip
        if self.runner == "V2" and not self.wrapped_speculator and self.draft_problem is None:
            self._wrap_speculator(runner)
        if self._capturing():
            self.step = None
            return
        step = _Step()
        tokens = getattr(scheduler_output, "num_scheduled_tokens", None) or {}
        step.tok = int(getattr(scheduler_output, "total_num_scheduled_tokens", 0) or 0)
        step.r = len(tokens)
        spec = getattr(scheduler_output, "scheduled_spec_decode_tokens", None) or {}
        step.sd = sum(len(v) for v in spec.values())
        if self.cuda:
            step.events.append(self._event())
        self.step = step
        step.own = time.perf_counter() - t0
        step.t0 = time.perf_counter()

    def end(self) -> None:
        t_end = time.perf_counter()
        step, self.step = self.step, None
        if step is None:
            return
        wall = t_end - step.t0
        t0 = time.perf_counter()
        record: dict[str, Any] = {"tok": step.tok, "r": step.r, "sd": step.sd}
        if self.cuda:
            step.events.append(self._event())
            make = functools.partial(_resolve, step, record)
            step.own += time.perf_counter() - t0
            self.recorder.write_lazy(make)
            return
        record["s"], record["src"] = round(wall, 7), "cpu"
        record["d"] = None if step.draft_s is None else round(step.draft_s, 7)
        step.own += time.perf_counter() - t0
        record["o"] = round(step.own, 7)
        self.recorder.write_step([record])

    def drafting(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``original`` (a drafting call) timed into the open step, when the step's
        ``sample_tokens`` calls it (not a dummy run, nor a CUDA graph capture)."""

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            step = self.step if self.enabled and self.in_sample else None
            start: Any = None
            if step is not None and self._capturing():
                step = None
            if step is not None:
                try:
                    start = self._event() if self.cuda else None
                except Exception as exc:  # never into vLLM
                    self.stop(exc)
                    step = None
            if step is None:
                return original(*args, **kwargs)
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - t0
                try:
                    t1 = time.perf_counter()
                    if start is not None:
                        step.draft_events.append((start, self._event()))
                    step.draft_s = (step.draft_s or 0.0) + elapsed
                    step.own += time.perf_counter() - t1
                except Exception as exc:
                    self.stop(exc)

        setattr(timed, _MARK, original)
        return timed

    def _wrap_speculator(self, runner: Any) -> None:
        self.wrapped_speculator = True
        speculator = getattr(runner, "speculator", None)
        propose = getattr(speculator, "propose", None)
        if speculator is None or not callable(propose):
            return  # no speculator: a baseline
        speculator.propose = self.drafting(propose)

    # -- wrappers -----------------------------------------------------------------------
    def wrap_execute(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def execute_model(runner: Any, *args: Any, **kwargs: Any) -> Any:
            if self.enabled and not kwargs.get("dummy_run"):
                try:
                    output = args[0] if args else kwargs.get("scheduler_output")
                    self.begin(runner, output)
                except Exception as exc:
                    self.stop(exc)
            result = original(runner, *args, **kwargs)
            if result is not None and self.step is not None:
                self.step = None  # no sample_tokens follows: not a step we time
            return result

        setattr(execute_model, _MARK, original)
        return execute_model

    def wrap_sample(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def sample_tokens(runner: Any, *args: Any, **kwargs: Any) -> Any:
            self.in_sample = True
            try:
                result = original(runner, *args, **kwargs)
            finally:
                self.in_sample = False
            if self.enabled and self.step is not None:
                try:
                    self.end()
                except Exception as exc:
                    self.stop(exc)
            return result

        setattr(sample_tokens, _MARK, original)
        return sample_tokens


def _resolve(step: _Step, record: dict[str, Any]) -> list[dict[str, Any]]:
    """A CUDA step's record once its events completed (on the writer thread)."""
    first, last = step.events
    last.synchronize()
    record["s"] = round(first.elapsed_time(last) / 1000.0, 7)
    drafts = [a.elapsed_time(b) / 1000.0 for a, b in step.draft_events]
    record["d"] = round(sum(drafts), 7) if drafts else None
    record["src"] = "cuda"
    record["o"] = round(step.own, 7)
    return [record]


def patch_module(module: ModuleType, directory: str | Path) -> str | None:
    """Wrap the runner class of ``module``; return why not (also in the status file)."""
    name = module.__name__
    runner = "V1" if name == V1_MODULE else "V2"
    cls = getattr(module, "GPUModelRunner", None)
    if cls is None:
        problem = f"{name} has no GPUModelRunner"
        write_json_status(directory, STATUS_PREFIX, {"state": "refused", "problem": problem,
                                                     "runner": runner})  # fmt: skip
        return problem
    if hasattr(cls.__dict__.get("execute_model"), _MARK):
        return None  # plugins load more than once per process
    problems, draft_problem = surface(name, cls)
    timer = StepTimer(directory, runner, draft_problem)
    if problems:
        timer.status({"state": "refused", "problem": "; ".join(problems)})
        return "; ".join(problems)
    cls.execute_model = timer.wrap_execute(cls.execute_model)
    cls.sample_tokens = timer.wrap_sample(cls.sample_tokens)
    if runner == "V1" and draft_problem is None:
        cls.propose_draft_token_ids = timer.drafting(cls.propose_draft_token_ids)
    timer.status({"state": "installed", "draft": draft_problem or "timed"})
    _TIMERS.append((cls, timer))
    return None


_TIMERS: list[tuple[type, StepTimer]] = []


def unpatch() -> None:
    """Restore every wrapped method (tests)."""
    for cls, timer in _TIMERS:
        for attr in (*STEP_METHODS, "propose_draft_token_ids"):
            fn = cls.__dict__.get(attr)
            if fn is not None and hasattr(fn, _MARK):
                setattr(cls, attr, getattr(fn, _MARK))
        timer.recorder.close()
    _TIMERS.clear()


def flush() -> None:
    for _, timer in _TIMERS:
        timer.recorder.flush()


def install(directory: str) -> None:
    """Time both runners' steps once vLLM imports them (or now, if it has)."""
    from tokenlens.capture.runner_drafts import when_imported

    for name in (V1_MODULE, V2_MODULE):

        def callback(module: ModuleType) -> None:
            try:
                problem = patch_module(module, directory)
            except Exception as exc:  # never break vLLM's import
                problem = repr(exc)
            if problem is not None:
                _vllm_logger().error("tokenlens: step timer not installed: %s", problem)

        when_imported(name, callback)


def _vllm_logger() -> logging.Logger:
    try:
        from vllm.logger import init_logger

        return init_logger("tokenlens.capture")
    except Exception:
        return logger
