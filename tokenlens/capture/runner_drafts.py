"""Draft token ids where vLLM's Model Runner V2 keeps them: the worker side.

Wraps ``GPUModelRunner.prepare_inputs`` of ``vllm.v1.worker.gpu.model_runner`` (patched
when vLLM imports that module) so that each step's verified drafts,
``draft_tokens[row, :n]``, are copied to the host asynchronously and written by a
writer thread, one line per step, to ``drafts-<tag>.jsonl``
(:func:`tokenlens.capture.recorder.process_tag`)::

    {"seq": 3, "t": 1764453612.5, "reqs": [{"r": "0-3f2a9c1b", "b": 7, "d": [11, 12, 13]}]}

``r``: engine request id; ``b``: output length before the step (the scheduler hook's
``b``); ``d``: the drafts verified. :func:`tokenlens.capture.events.build_capture` joins
them on ``(r, b)``. The runner's thread never waits for the device. Only the engine's
writer rank records (:func:`tokenlens.capture.layout.writer_ranks`); a worker whose rank
cannot be read in a multi-worker layout records nothing and says why in its status
file. A changed vLLM surface patches nothing (one error line in vLLM's log, status
``refused``); run-time errors stop this hook only, never vLLM. Why and how:
docs/capture.md, "Model Runner V2".
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.abc
import importlib.machinery
import inspect
import logging
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from tokenlens.capture.layout import IDLE, runner_parallel_config, writer_ranks
from tokenlens.capture.recorder import StepRecorder, write_json_status

RUNNER_MODULE = "vllm.v1.worker.gpu.model_runner"
INPUT_BATCH_MODULE = "vllm.v1.worker.gpu.input_batch"
STATES_MODULE = "vllm.v1.worker.gpu.states"
NGRAM_MODULE = "vllm.v1.worker.gpu.spec_decode.ngram.speculator"
DRAFTS_PREFIX = "drafts"
STATUS_PREFIX = "runner"
BATCH_FIELDS = ("req_ids", "num_reqs", "idx_mapping", "idx_mapping_np", "num_draft_tokens_per_req")
STATE_TENSORS = ("draft_tokens", "prompt_len", "total_len")
# The kernel line that makes the verified drafts a prefix of the request's row.
PREFIX_READ = "draft_tokens_ptr+req_state_idx*draft_tokens_stride+block"
# V2's n-gram speculator: slots without a match repeat the last sampled token.
NGRAM_FILL = "tl.where(slot_valid,gathered,last_tok)"
_PATCH_MARK = "__tokenlens_original__"
PAUSE_FILE = "paused"  # the scheduler hook's (tokenlens.capture.plugin.PAUSE_FILE)
PAUSE_CHECK_SECONDS = 0.5
logger = logging.getLogger("tokenlens.capture")
_active: RunnerHook | None = None


def _squash(text: str) -> str:
    return "".join(text.split())


def _attr_chain(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def prepare_inputs_problem(fn: Callable[..., Any]) -> str | None:
    """Whether ``prepare_inputs`` builds the verification input from ``req_states.draft_tokens``."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return "GPUModelRunner.prepare_inputs has no readable source"
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and _attr_chain(node.func).endswith("combine_sampled_and_draft_tokens")
            and any(_attr_chain(a) == "self.req_states.draft_tokens" for a in node.args)
        ):
            return None
    return (
        "GPUModelRunner.prepare_inputs no longer passes self.req_states.draft_tokens to "
        "combine_sampled_and_draft_tokens"
    )


def _fields(cls: type) -> set[str]:
    if dataclasses.is_dataclass(cls):
        return {f.name for f in dataclasses.fields(cls)}
    return set(getattr(cls, "__annotations__", {}))


def surface_problems(
    runner_cls: type, batch_cls: type, state_cls: type, batch_module: ModuleType
) -> list[str]:
    """What breaks the assumptions above, on the live classes (empty: all hold)."""
    problems = []
    fn = runner_cls.__dict__.get("prepare_inputs")
    if not callable(fn):
        problems.append("GPUModelRunner.prepare_inputs is missing")
    elif (why := prepare_inputs_problem(getattr(fn, _PATCH_MARK, fn))) is not None:
        problems.append(why)
    missing = [f for f in BATCH_FIELDS if f not in _fields(batch_cls)]
    if missing:
        problems.append(f"InputBatch lacks {', '.join(missing)}")
    try:
        state_src = _squash(inspect.getsource(state_cls))
    except (OSError, TypeError):
        state_src = ""
    lacking = [t for t in STATE_TENSORS if f"self.{t}=" not in state_src]
    if lacking:
        problems.append(f"RequestState no longer sets {', '.join(lacking)}")
    try:
        batch_src = _squash(inspect.getsource(batch_module))
    except (OSError, TypeError):
        batch_src = ""
    if PREFIX_READ not in batch_src:
        problems.append(
            "_combine_sampled_and_draft_tokens_kernel no longer reads a request's drafts "
            "as a prefix of its draft_tokens row"
        )
    return problems


def ngram_fill_holds() -> bool | None:
    """Whether V2's n-gram speculator fills unmatched slots with the last sampled token."""
    module = sys.modules.get(NGRAM_MODULE)
    if module is None:
        try:
            module = importlib.import_module(NGRAM_MODULE)
        except Exception:
            return None
    try:
        return NGRAM_FILL in _squash(inspect.getsource(module))
    except (OSError, TypeError):
        return None


class RunnerHook:
    """Per-process state of the worker-side hook."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self.recorder = StepRecorder(directory, prefix=DRAFTS_PREFIX)
        self.enabled = True
        self.checked_instance = False
        self.writes = True
        self.paused = False
        self.next_pause_check = 0.0

    def _paused(self) -> bool:
        """The scheduler hook's pause file (``<trace dir>/paused``), looked up at most
        every 0.5 s: benchmarks compare hooked and unhooked steps in one engine."""
        now = time.monotonic()
        if now >= self.next_pause_check:
            self.next_pause_check = now + PAUSE_CHECK_SECONDS
            self.paused = (self.directory / PAUSE_FILE).exists()
        return self.paused

    def status(self, data: dict[str, Any]) -> None:
        write_json_status(self.directory, STATUS_PREFIX, data)

    def refuse(self, problem: str) -> None:
        self.enabled = False
        self.status({"state": "refused", "problem": problem, "runner": "v2"})
        _vllm_logger().error(
            "tokenlens: draft ids under Model Runner V2 not recorded (surface changed): %s",
            problem,
        )

    def wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def prepare_inputs(runner: Any, *args: Any, **kwargs: Any) -> Any:
            batch = original(runner, *args, **kwargs)
            if self.enabled:
                try:
                    if not self.checked_instance:
                        self._first_call(runner)
                    if self.writes and self.enabled and not self._paused():
                        self.observe(runner, batch)
                except Exception as exc:  # never into vLLM
                    self.enabled = False
                    self.status({"state": "failed", "problem": repr(exc), "runner": "v2"})
                    _vllm_logger().error("tokenlens: draft-id capture stopped: %r", exc)
            return batch

        setattr(prepare_inputs, _PATCH_MARK, original)
        return prepare_inputs

    def _first_call(self, runner: Any) -> None:
        """Check the instance (tensors, rank) and say what this runner drafts with."""
        self.checked_instance = True
        states = getattr(runner, "req_states", None)
        drafts: Any = getattr(states, "draft_tokens", None)
        prompt_len = getattr(states, "prompt_len", None)
        if getattr(drafts, "ndim", None) != 2 or not hasattr(prompt_len, "np"):
            self.refuse("runner.req_states has no 2-D draft_tokens tensor or prompt_len.np")
            return
        if not hasattr(getattr(states, "total_len", None), "gpu"):
            self.refuse("runner.req_states.total_len has no device tensor (.gpu)")
            return
        writes, ranks = writer_ranks(runner_parallel_config(runner))
        if writes is None:
            self.refuse(ranks["problem"])
            return
        self.writes = writes
        speculator = getattr(runner, "speculator", None)
        info: dict[str, Any] = {
            "state": "recording" if writes else IDLE,
            "ranks": ranks,
            "runner": "v2",
            "runner_class": f"{type(runner).__module__}.{type(runner).__qualname__}",
            "speculator_class": (
                f"{type(speculator).__module__}.{type(speculator).__qualname__}"
                if speculator is not None
                else None
            ),
            "k": int(drafts.shape[1]),
        }
        if speculator is not None and type(speculator).__module__ == NGRAM_MODULE:
            holds = ngram_fill_holds()
            info["filler"] = {
                "rule": "ngram_gpu_last_token" if holds else None,
                "problem": None if holds else "V2 n-gram fill rule not found in vLLM's source",
                "min_n": int(getattr(speculator, "min_n", 0)),
                "max_n": int(getattr(speculator, "max_n", 0)),
                "k": int(getattr(speculator, "num_speculative_steps", drafts.shape[1])),
                "max_model_len": int(getattr(speculator, "max_model_len", 0)),
            }
        self.status(info)

    def observe(self, runner: Any, batch: Any) -> None:
        """Queue the copy of this step's verified drafts; the writer thread resolves it."""
        counts = batch.num_draft_tokens_per_req
        if counts is None:
            return
        num_reqs = int(batch.num_reqs)
        counts = counts[:num_reqs]
        if not counts.any():
            return
        states = runner.req_states
        # Two whole-tensor copies (a few kB) and an event: no gather kernel, nothing for
        # the runner's thread to wait on; the rows are picked on the writer thread.
        drafts = states.draft_tokens.to("cpu", non_blocking=True, copy=True)
        total = states.total_len.gpu.to("cpu", non_blocking=True, copy=True)
        fence = _fence(states.draft_tokens)
        index = np.array(batch.idx_mapping_np[:num_reqs], copy=True)
        prompt = states.prompt_len.np[index].copy()
        req_ids = list(batch.req_ids[:num_reqs])
        self.recorder.write_lazy(
            functools.partial(resolve, fence, drafts, total, index, req_ids, counts.copy(), prompt)
        )


def resolve(
    fence: Any,
    drafts: Any,
    total: Any,
    index: Any,
    req_ids: Sequence[str],
    counts: Any,
    prompt: Any,
) -> list[dict[str, Any]]:
    """The step's records once the copies landed (runs on the writer thread)."""
    if fence is not None:
        fence.synchronize()
    rows = drafts.numpy()[index].tolist()
    lengths = total.numpy()[index].tolist()
    out = []
    for i, req_id in enumerate(req_ids):
        n = int(counts[i])
        if n > 0:
            out.append({"r": req_id, "b": int(lengths[i]) - int(prompt[i]), "d": rows[i][:n]})
    return out


def _fence(tensor: Any) -> Any:
    """A CUDA event after the queued copy (None on a device whose copies are synchronous)."""
    if getattr(tensor, "is_cuda", False):
        import torch

        event = torch.cuda.Event()  # type: ignore[no-untyped-call]
        event.record()
        return event
    return None


def _vllm_logger() -> logging.Logger:
    try:
        from vllm.logger import init_logger

        return init_logger("tokenlens.capture")
    except Exception:
        return logger


def patch_module(module: ModuleType, directory: str | Path) -> str | None:
    """Check the V2 runner's surface and wrap ``prepare_inputs``; return why not, or None."""
    global _active
    runner_cls = getattr(module, "GPUModelRunner", None)
    problem: str | None
    if runner_cls is None:
        problem = f"{RUNNER_MODULE} has no GPUModelRunner"
    elif hasattr(runner_cls.__dict__.get("prepare_inputs"), _PATCH_MARK):
        return None  # plugins load more than once per process
    else:
        batch_module = importlib.import_module(INPUT_BATCH_MODULE)
        states_module = importlib.import_module(STATES_MODULE)
        problems = surface_problems(
            runner_cls,
            getattr(batch_module, "InputBatch", object),
            getattr(states_module, "RequestState", object),
            batch_module,
        )
        problem = "; ".join(problems) if problems else None
    hook = RunnerHook(directory)
    if problem is not None:
        hook.refuse(problem)
        return problem
    assert runner_cls is not None
    runner_cls.prepare_inputs = hook.wrap(runner_cls.__dict__["prepare_inputs"])
    _active = hook
    return None


def unpatch() -> None:
    """Restore ``prepare_inputs`` (tests)."""
    global _active
    module = sys.modules.get(RUNNER_MODULE)
    runner_cls = getattr(module, "GPUModelRunner", None)
    fn = runner_cls.__dict__.get("prepare_inputs") if runner_cls is not None else None
    if fn is not None and hasattr(fn, _PATCH_MARK):
        runner_cls.prepare_inputs = getattr(fn, _PATCH_MARK)  # type: ignore[union-attr]
    if _active is not None:
        _active.recorder.close()
    _active = None
    for finder in [f for f in sys.meta_path if isinstance(f, _AfterImport)]:
        sys.meta_path.remove(finder)


def flush() -> None:
    if _active is not None:
        _active.recorder.flush()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs each of ``callbacks`` right after ``name`` is first imported."""

    def __init__(self, name: str, callback: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.callbacks = [callback]

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        sys.meta_path.remove(self)  # once
        loader = spec.loader
        original = loader.exec_module
        callbacks = self.callbacks

        def exec_module(module: ModuleType) -> None:
            original(module)
            for callback in callbacks:
                callback(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> None:
    """``callback(module)`` now if ``name`` is imported, else right after vLLM imports it
    (one finder per module name; the step timer and this hook may both wait for one)."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    for finder in sys.meta_path:
        if isinstance(finder, _AfterImport) and finder.name == name:
            finder.callbacks.append(callback)
            return
    sys.meta_path.insert(0, _AfterImport(name, callback))


def install_when_imported(directory: str | Path) -> None:
    """Patch the V2 runner now if it is loaded, else as soon as vLLM imports it."""

    def callback(module: ModuleType) -> None:
        try:
            patch_module(module, directory)
        except Exception as exc:  # never break vLLM's import
            _vllm_logger().error("tokenlens: draft-id capture not installed: %r", exc)

    when_imported(RUNNER_MODULE, callback)
