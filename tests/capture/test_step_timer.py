"""The step timer's surface check and its lines, on stand-in runner classes.

The stand-ins have the methods the timer wraps, shaped as vLLM's V1 runner calls them
(``sample_tokens`` calls ``self.propose_draft_token_ids``); the real V1 runner is timed
in tests/bench/test_step_timer_vllm.py. No vLLM import here.

The timer reads a fake clock that only the stand-ins advance (3 ms a forward pass, 2 ms
a drafting call), so the durations asserted are exact, whatever the machine's load (a
real sleep of 2 ms took 6.8 ms on a loaded CI machine).
"""

from __future__ import annotations

import json
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tokenlens.bench.steps import read_step_times, step_split, timer_problem
from tokenlens.capture import step_timer


class _Clock:
    """``perf_counter`` for the timer: moves only when a stand-in "works"."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def work(self, seconds: float) -> None:
        self.now += seconds


_CLOCK = _Clock()


@pytest.fixture(autouse=True)
def _fake_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(step_timer, "time", types.SimpleNamespace(perf_counter=_CLOCK.perf_counter))


class _Output:
    def __init__(self, sd: int) -> None:
        self.num_scheduled_tokens = {"a": 1 + sd}
        self.total_num_scheduled_tokens = 1 + sd
        self.scheduled_spec_decode_tokens = {"a": [0] * sd} if sd else {}


def _runner_class(calls_drafter: bool = True, has_sample: bool = True) -> type:
    class GPUModelRunner:
        device = types.SimpleNamespace(type="cpu")
        # one worker per engine: the timer's writer rule needs no parallel state
        parallel_config = types.SimpleNamespace(tensor_parallel_size=1, pipeline_parallel_size=1)

        def execute_model(self, scheduler_output: Any, intermediate_tensors: Any = None) -> None:
            _CLOCK.work(0.003)

        def propose_draft_token_ids(self) -> list[int]:
            _CLOCK.work(0.002)
            return [1]

        if has_sample:
            if calls_drafter:

                def sample_tokens(self, grammar_output: Any) -> str:
                    self.propose_draft_token_ids()
                    return "out"
            else:

                def sample_tokens(self, grammar_output: Any) -> str:
                    return "out"

    return GPUModelRunner


def _module(cls: type) -> types.ModuleType:
    module = types.ModuleType(step_timer.V1_MODULE)
    module.GPUModelRunner = cls  # type: ignore[attr-defined]
    return module


@pytest.fixture(autouse=True)
def _unpatch() -> Iterator[None]:
    yield
    step_timer.unpatch()


def _status(directory: Path) -> dict[str, Any]:
    (path,) = directory.glob(f"{step_timer.STATUS_PREFIX}-*.json")
    return dict(json.loads(path.read_text()))


def test_steps_and_drafting_are_timed_and_the_wrappers_pass_results_through(
    tmp_path: Path,
) -> None:
    cls = _runner_class()
    assert step_timer.patch_module(_module(cls), tmp_path) is None
    runner = cls()
    start = time.time()
    for sd in (0, 2, 2, 2):
        assert runner.execute_model(_Output(sd)) is None
        assert runner.sample_tokens(None) == "out"
    runner.propose_draft_token_ids()  # outside a step: not counted anywhere
    runner.execute_model(_Output(2))
    runner.propose_draft_token_ids()  # inside a step, not from sample_tokens: not drafting
    runner.execute_model(_Output(2))  # the previous step never sampled: dropped
    runner.sample_tokens(None)
    step_timer.flush()
    records = read_step_times(tmp_path)
    assert len(records) == 5 and all(r["src"] == "cpu" for r in records)
    assert [r["sd"] for r in records] == [0, 2, 2, 2, 2]
    # every step: one forward pass (3 ms) and one drafting call (2 ms); the last step's
    # drafting is its own call, not the stray one inside the dropped step
    for r in records:
        assert r["s"] == pytest.approx(0.005) and r["d"] == pytest.approx(0.002)
        assert r["o"] == 0  # the fake clock does not move while the timer works
    split = step_split(tmp_path, [(start, time.time() + 1)], speculative=True)
    assert split["timed_steps"] == 4 and split["step_timing"] == "perf_counter"
    assert split["draft_ms"] == pytest.approx(2.0) and split["verify_ms"] == pytest.approx(3.0)
    assert _status(tmp_path)["state"] == "timing" and timer_problem(tmp_path) is None
    # outside the measured window nothing counts
    late = step_split(tmp_path, [(time.time() + 5, time.time() + 6)], speculative=True)
    assert late["step_ms"] is None and "no decode step" in late["step_timing"]


def test_a_changed_step_surface_is_refused_and_nothing_is_wrapped(tmp_path: Path) -> None:
    cls = _runner_class(has_sample=False)
    before = cls.__dict__["execute_model"]
    problem = step_timer.patch_module(_module(cls), tmp_path)
    assert problem is not None and "sample_tokens" in problem
    assert cls.__dict__["execute_model"] is before
    assert _status(tmp_path)["state"] == "refused"
    assert "step timer refused" in str(timer_problem(tmp_path))


def test_a_drafting_call_not_found_times_steps_and_says_drafting_is_unavailable(
    tmp_path: Path,
) -> None:
    cls = _runner_class(calls_drafter=False)
    assert step_timer.patch_module(_module(cls), tmp_path) is None
    runner = cls()
    start = time.time()
    runner.execute_model(_Output(2))
    runner.sample_tokens(None)
    step_timer.flush()
    split = step_split(tmp_path, [(start, time.time() + 1)], speculative=True)
    assert split["step_ms"] is not None and split["draft_ms"] is None
    assert "sample_tokens no longer calls self.propose_draft_token_ids" in split["step_timing"]
