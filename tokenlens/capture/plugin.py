"""The vLLM general plugin: wrap the scheduler's reconciliation of drafts and samples.

Wraps ``Scheduler.update_from_output`` and ``Scheduler.make_spec_decoding_stats``
(and reads ``Scheduler.requests[id].output_token_ids``) to record every counted
verification step, so recorded totals equal vLLM's counters. Does nothing unless
``TOKENLENS_TRACE_DIR`` is set. A scheduler subclass overriding a hooked method (also
one defined after loading) is hooked too when the signature matches. Refused with one
error line in vLLM's log, vLLM left untouched: a surface :mod:`tokenlens.capture.surface`
finds missing, any other override, and (at the first step) a parallel layout that
cannot be traced exactly (:mod:`tokenlens.capture.layout`). Recorder errors disable
tracing, never vLLM. The run's tier comes from :mod:`tokenlens.capture.tiers`. What
each hook reads and why: docs/capture.md, "Where" and "Which vLLM".

Why one file over 450 lines: this is the hook's whole contact with vLLM's scheduler
(installing it, refusing an override, the wrapped methods of :class:`_Hook` and what
they read from the scheduler), read side by side at every vLLM upgrade; splitting it
would only spread that contact over more files.
"""

from __future__ import annotations

import ast
import functools
import inspect
import logging
import os
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenlens.capture.layout import config_layout, refusal, runner_parallel_config
from tokenlens.capture.recorder import StepRecorder, write_status
from tokenlens.capture.source_ast import calls_super, stats_calls
from tokenlens.capture.step_records import StepSnapshot
from tokenlens.capture.surface import (
    HOOKED,
    STATS_PARAMS,
    UPDATE_PARAMS,
    Assumption,
    SurfaceReport,
    check_sources,
)
from tokenlens.capture.tiers import REFUSED, UNTESTED, Tier, tier_for
from tokenlens.engine.config import STEP_TIMER_ENV, TRACE_DIR_ENV
from tokenlens.engine.facts import config_facts
from tokenlens.engine.vllm_source import directory_reader

_PATCH_MARK = "__tokenlens_original__"
_SUBCLASS_MARK = "__tokenlens_subclass_hook__"
PAUSE_FILE = "paused"  # in the trace directory: the hook passes steps through untouched
PAUSE_CHECK_SECONDS = 0.5
logger = logging.getLogger("tokenlens.capture")
_WANT = {"update_from_output": UPDATE_PARAMS, "make_spec_decoding_stats": STATS_PARAMS}
_active: _Hook | None = None  # the hook installed in this process


def register() -> None:
    """Entry point (``vllm.general_plugins``): install the hook if asked to."""
    directory = os.environ.get(TRACE_DIR_ENV)
    if not directory:
        return
    if os.environ.get(STEP_TIMER_ENV):
        _install_step_timer(directory)
    try:
        problem = install(directory)
    except Exception as exc:  # never break vLLM start-up
        problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:
        _vllm_logger().error("tokenlens: tracing disabled, vLLM left untouched: %s", problem)
        return
    _install_runner_hook(directory)


def _install_runner_hook(directory: str) -> None:
    """Draft ids on the worker side, for Model Runner V2 (:mod:`.runner_drafts`)."""
    try:
        from tokenlens.capture.runner_drafts import install_when_imported

        install_when_imported(directory)
    except Exception as exc:  # never break vLLM start-up
        _vllm_logger().error("tokenlens: draft-id capture not installed: %r", exc)


def _install_step_timer(directory: str) -> None:
    """Opt-in step and drafting times, worker side (:mod:`.step_timer`)."""
    try:
        from tokenlens.capture.step_timer import install as install_timer

        install_timer(directory)
    except Exception as exc:  # never break vLLM start-up
        _vllm_logger().error("tokenlens: step timer not installed: %r", exc)


def _vllm_logger() -> logging.Logger:
    try:
        from vllm.logger import init_logger

        return init_logger("tokenlens.capture")
    except Exception:
        return logger


def _original(fn: Any) -> Any:
    return getattr(fn, _PATCH_MARK, fn)


def _all_subclasses(cls: type) -> list[type]:
    out: list[type] = []
    todo = list(cls.__subclasses__())
    while todo:
        sub = todo.pop()
        if sub not in out:
            out.append(sub)
            todo.extend(sub.__subclasses__())
    return out


def override_problem(cls: type, name: str) -> str | None:
    """Why ``cls``'s own ``name`` cannot carry the hook, or None if it can."""
    fn = _original(cls.__dict__[name])
    try:
        params = tuple(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return f"{cls.__qualname__}.{name} has no inspectable signature"
    if params != _WANT[name]:
        return f"{cls.__qualname__}.{name} has parameters {params[1:]}, expected {_WANT[name][1:]}"
    if name == "update_from_output":
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
        except (OSError, TypeError, SyntaxError):
            return None  # no source to read: the liveness check watches it at run time
        if not stats_calls(tree) and not calls_super(tree, name):
            return (
                f"{cls.__qualname__}.update_from_output overrides the hooked method and "
                "neither calls make_spec_decoding_stats nor super().update_from_output"
            )
    return None


def live_problems(scheduler_cls: type) -> list[str]:
    """What the live classes say (monkeypatches and subclasses the sources cannot show)."""
    problems = []
    for name in HOOKED:
        fn = getattr(scheduler_cls, name, None)
        if not callable(fn):
            problems.append(f"Scheduler.{name} is missing")
            continue
        params = tuple(inspect.signature(_original(fn)).parameters)
        if params != _WANT[name]:
            problems.append(f"Scheduler.{name} has parameters {params[1:]}")
    for sub in _all_subclasses(scheduler_cls):
        for name in HOOKED:
            if name in sub.__dict__ and (why := override_problem(sub, name)) is not None:
                problems.append(why)
    return problems


def check_running() -> tuple[Any, SurfaceReport, Tier]:
    """(Scheduler class, surface report, tier) of the vLLM imported in this process."""
    import vllm
    from vllm.v1.core.sched import async_scheduler  # noqa: F401  (a known subclass)
    from vllm.v1.core.sched.scheduler import Scheduler

    version = str(vllm.__version__)
    report = check_sources(directory_reader(Path(vllm.__file__).parent.parent), version)
    live = live_problems(Scheduler)
    if live:
        extra = Assumption("live scheduler classes", False, "; ".join(live))
        report = replace(report, assumptions=(*report.assumptions, extra), fingerprint=None)
    return Scheduler, report, tier_for(version, report)


def install(directory: str) -> str | None:
    """Patch the scheduler once per process; return why not, or None on success."""
    global _active
    scheduler_cls, report, tier = check_running()
    if tier.name == REFUSED:
        write_status(
            directory, {"state": "refused", "problem": report.problem(), **_info(report, tier)}
        )
        return report.problem()
    if hasattr(scheduler_cls.update_from_output, _PATCH_MARK):
        return None  # plugins load more than once per process
    if tier.name == UNTESTED:
        _vllm_logger().warning("tokenlens: tracing an untested vLLM: %s", tier.note)
    hook = _Hook(StepRecorder(directory), _info(report, tier), report.request_index)
    for cls in [scheduler_cls, *_all_subclasses(scheduler_cls)]:
        hook.adopt(cls)
    _watch_subclasses(scheduler_cls, hook)
    _active = hook
    return None


def _info(report: SurfaceReport, tier: Tier) -> dict[str, Any]:
    return {
        "vllm_version": report.version,
        "tier": tier.name,
        "tier_note": tier.note,
        "fingerprint": report.fingerprint,
    }


def _watch_subclasses(scheduler_cls: Any, hook: _Hook) -> None:
    """Hook (or refuse) scheduler subclasses defined from now on (``scheduler_cls``)."""

    def __init_subclass__(cls: Any, /, **kwargs: Any) -> None:
        super(scheduler_cls, cls).__init_subclass__(**kwargs)
        if _active is hook:
            hook.adopt(cls)

    setattr(__init_subclass__, _SUBCLASS_MARK, True)
    setattr(scheduler_cls, "__init_subclass__", classmethod(__init_subclass__))  # noqa: B010


def uninstall() -> None:
    """Restore the original methods everywhere (tests; a refused late subclass)."""
    global _active
    from vllm.v1.core.sched.scheduler import Scheduler

    for cls in [Scheduler, *_all_subclasses(Scheduler)]:
        for name in HOOKED:
            fn = cls.__dict__.get(name)
            if fn is not None and hasattr(fn, _PATCH_MARK):
                setattr(cls, name, getattr(fn, _PATCH_MARK))
    hook = Scheduler.__dict__.get("__init_subclass__")
    if hook is not None and hasattr(getattr(hook, "__func__", None), _SUBCLASS_MARK):
        delattr(Scheduler, "__init_subclass__")
    if _active is not None:
        _active.recorder.close()
    _active = None
    from tokenlens.capture.runner_drafts import unpatch
    from tokenlens.capture.step_timer import unpatch as unpatch_timer

    unpatch()
    unpatch_timer()


def flush() -> None:
    """Make every recorded step durable now (tests read the files in-process)."""
    if _active is not None:
        _active.recorder.flush()


class _Hook:
    """Per-process state: the recorder, the step being reconciled, the hook's own cost."""

    def __init__(
        self, recorder: StepRecorder, info: dict[str, Any], index: str | None = None
    ) -> None:
        self.recorder = recorder
        self.info = info
        # How vLLM's update_from_output finds a request's sampled tokens: by the
        # ``req_id_to_index`` dict (to 0.33) or by position in ``req_ids`` (0.34).
        self.by_position = index == "req_ids"
        self.enabled = True
        self.failed: str | None = None
        self.seen_scheduler = False
        # the step in progress (None outside update_from_output)
        self.step: StepSnapshot | None = None
        self.drafts: dict[str, Any] = {}
        # Self-timing: hook seconds and wall seconds since the last written line.
        self.hook_s = 0.0
        self.mark = time.perf_counter()
        self.first_line = True
        self.paused = False
        self.next_pause_check = 0.0

    def _paused(self) -> bool:
        """Whether ``<trace dir>/paused`` exists, looked up at most every PAUSE_CHECK_SECONDS.

        A paused hook records nothing (docs/capture.md, "Capture cost"); resuming
        restarts the self-timing as for a new process.
        """
        now = time.monotonic()
        if now >= self.next_pause_check:
            self.next_pause_check = now + PAUSE_CHECK_SECONDS
            paused = (self.recorder.directory / PAUSE_FILE).exists()
            if self.paused and not paused:
                self.first_line, self.hook_s = True, 0.0
            self.paused = paused
        return self.paused

    # -- installation -------------------------------------------------------------
    def adopt(self, cls: type) -> None:
        """Wrap ``cls``'s own hooked methods; refuse (and undo everything) if unfit."""
        for name in HOOKED:
            fn = cls.__dict__.get(name)
            if fn is None or hasattr(fn, _PATCH_MARK):
                continue
            problem = override_problem(cls, name)
            if problem is not None:
                self._refuse(problem)
                return
            wrap = self.wrap_update if name == "update_from_output" else self.wrap_stats
            setattr(cls, name, wrap(fn))

    def _refuse(self, problem: str) -> None:
        uninstall()
        self.enabled = False
        write_status(
            str(self.recorder.directory), {"state": REFUSED, "problem": problem, **self.info}
        )
        _vllm_logger().error("tokenlens: tracing disabled, vLLM left untouched: %s", problem)

    def _disable(self, exc: BaseException) -> None:
        self.enabled = False
        self._fail(f"tracing stopped after an error: {exc!r}")

    def _fail(self, reason: str) -> None:
        if self.failed is None:
            self.failed = reason
            _vllm_logger().error("tokenlens: capture failed: %s", reason)
            self._status("failed")

    def _status(self, state: str, sched: Any = None) -> None:
        data = {**self.info, "state": state}
        if self.failed is not None:
            data["problem"] = self.failed
        if sched is not None:
            self.info.update(_scheduler_info(sched))
            data.update(self.info)
        write_status(str(self.recorder.directory), data)

    # -- wrappers -----------------------------------------------------------------
    def wrap_update(self, original: Any) -> Any:
        @functools.wraps(original)
        def update_from_output(sched: Any, scheduler_output: Any, model_runner_output: Any) -> Any:
            # off, an override's super(), or paused (benchmarks/bench_capture_overhead.py)
            if not self.enabled or self.step is not None or self._paused():
                return original(sched, scheduler_output, model_runner_output)
            t0 = time.perf_counter()
            try:
                self._begin(sched, scheduler_output, model_runner_output)
            except Exception as exc:
                self._disable(exc)
            self.hook_s += time.perf_counter() - t0
            try:
                return original(sched, scheduler_output, model_runner_output)
            finally:
                t1 = time.perf_counter()
                if self.enabled:
                    try:
                        self._end(sched)
                    except Exception as exc:
                        self._disable(exc)
                self.step = None
                self.drafts = {}
                self.hook_s += time.perf_counter() - t1

        setattr(update_from_output, _PATCH_MARK, original)
        return update_from_output

    def wrap_stats(self, original: Any) -> Any:
        signature = inspect.signature(original)

        @functools.wraps(original)
        def make_spec_decoding_stats(sched: Any, *args: Any, **kwargs: Any) -> Any:
            if self.enabled and self.step is not None:
                t0 = time.perf_counter()
                try:
                    if len(args) == 1 and len(kwargs) == 4:  # how vLLM calls it: fast path
                        self._spec(kwargs)
                    else:
                        self._spec(signature.bind(sched, *args, **kwargs).arguments)
                except Exception as exc:
                    self._disable(exc)
                self.hook_s += time.perf_counter() - t0
            return original(sched, *args, **kwargs)

        setattr(make_spec_decoding_stats, _PATCH_MARK, original)
        return make_spec_decoding_stats

    # -- the three moments of a step ------------------------------------------------
    def _begin(self, sched: Any, scheduler_output: Any, model_runner_output: Any) -> None:
        """Before vLLM appends anything: where each request's new tokens will land
        (columns, :mod:`tokenlens.capture.step_records`)."""
        if not self.seen_scheduler:
            self.seen_scheduler = True
            self._status("recording", sched)
            if (why := refusal(self.info["parallel"])) is not None:
                return self._refuse(why)  # one line; vLLM goes on untraced
        step = StepSnapshot()
        sampled = model_runner_output.sampled_token_ids
        if sampled is not None and len(sampled):
            if self.by_position:
                ids = list(model_runner_output.req_ids[: len(sampled)])
                rows = sampled[: len(ids)]
            else:
                index = model_runner_output.req_id_to_index
                ids = [rid for rid, i in index.items() if i < len(sampled)]
                rows = [sampled[index[rid]] for rid in ids]
            get = sched.requests.get
            step.ids = ids
            step.requests = requests = [get(rid) for rid in ids]
            step.before = [-1 if q is None else len(q.output_token_ids) for q in requests]
            step.sample(rows)
        self.step = step
        self.drafts = scheduler_output.scheduled_spec_decode_tokens

    def _spec(self, args: dict[str, Any]) -> None:
        """vLLM is counting one verification step of one request: note its drafts."""
        assert self.step is not None
        req_id = args["request_id"]
        invalid = args["num_invalid_spec_tokens"]
        self.step.count(
            req_id,
            self.drafts.get(req_id),
            args["num_accepted_tokens"],
            invalid.get(req_id, 0) if invalid else 0,
        )

    def _end(self, sched: Any) -> None:
        """After vLLM appended: how many of the sampled tokens survived stop checks."""
        step = self.step
        assert step is not None
        kept = step.kept = [
            0 if q is None else len(q.output_token_ids) - b
            for q, b in zip(step.requests, step.before, strict=True)
        ]
        counted = step.spec_ids
        # a request that gained several tokens in a step vLLM did not count?
        if len(counted) < len(kept) and max(kept, default=0) > 1:
            known = set(counted)
            for rid, n in zip(step.ids, kept, strict=True):
                if n > 1 and rid not in known:
                    self._fail(
                        f"request {rid} gained {n} tokens in one step but vLLM's "
                        "make_spec_decoding_stats was never reached: the hook cannot see "
                        "its drafts"
                    )
                    break
        if self.recorder.error is not None:
            self._fail(f"the step writer stopped: {self.recorder.error}")
        if counted or any(kept):
            now = time.perf_counter()
            wall = now - self.mark
            # The hook's time since the last line; this _end and its write count in the next.
            timing: dict[str, float | None] = {"h": round(self.hook_s, 7), "w": round(wall, 6)}
            if self.first_line:  # the first interval runs from install, not from a step
                timing["w"] = None
                self.first_line = False
            step.requests = []  # vLLM's objects are not for the writer thread
            self.recorder.write_columns(step.columns(), timing)
            self.mark = now
            self.hook_s = 0.0


def _scheduler_info(sched: Any) -> dict[str, Any]:
    """What the run's manifest should know about the scheduler actually in use."""
    cls = type(sched)
    config = getattr(sched, "scheduler_config", None)
    is_async = bool(getattr(config, "async_scheduling", False))
    try:
        from vllm.v1.core.sched.async_scheduler import AsyncScheduler

        is_async = is_async or isinstance(sched, AsyncScheduler)
    except ImportError:
        pass
    return {
        "scheduler_class": f"{cls.__module__}.{cls.__qualname__}",
        "async_scheduling": is_async,
        "num_spec_tokens": int(getattr(sched, "num_spec_tokens", 0) or 0),
        "per_request_metrics": getattr(sched, "spec_decode_metrics_level", None),
        # 1 for generation; 0 for pooling and diffusion (vLLM 0.32+): no correction or
        # bonus token after the accepted drafts, so the first rejected position emits none.
        "num_sampled_tokens_per_step": getattr(sched, "num_sampled_tokens_per_step", None),
        "engine": _engine_facts(sched),
        "parallel": config_layout(runner_parallel_config(sched)),
    }


def _engine_facts(sched: Any) -> dict[str, Any] | None:
    """The resolved config's facts as this scheduler process sees them (``vllm serve``)."""
    config = getattr(sched, "vllm_config", None)
    if config is None:
        return None
    try:
        return config_facts(config)
    except Exception as exc:  # a description must never stop a trace
        return {"error": f"{type(exc).__name__}: {exc}"}
