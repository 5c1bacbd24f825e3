"""Work beside the caller in a forked process (:mod:`tokenlens.analysis.forked`).

:func:`beside` runs a task in a process forked from the test's, hands back its value or
its error, says in one line when the process ended without an answer, and ends a
process whose result nobody asked for; without a fork it runs the task here, when asked.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest

from tokenlens.analysis import forked
from tokenlens.analysis.forked import beside, can_fork, default_jobs
from tokenlens.errors import TokenlensError

needs_fork = pytest.mark.skipif(not can_fork(), reason="this platform does not fork")


@needs_fork
def test_the_task_runs_in_another_process_and_its_value_comes_back() -> None:
    big = list(range(100_000))  # inherited by the child, not sent to it
    with beside(lambda: (os.getpid(), sum(big)), "a sum", fork=True) as side:
        pid, total = side.result()
        assert side.result() == (pid, total)  # asked twice, answered once
    assert pid != os.getpid() and total == sum(big)


def test_without_fork_the_task_runs_here_when_asked() -> None:
    calls: list[int] = []

    def task() -> int:
        calls.append(os.getpid())
        return 7

    with beside(task, "seven", fork=False) as side:
        assert calls == []  # not before it is asked
        assert side.result() == 7 and side.result() == 7
    assert calls == [os.getpid()]


def _fails(error: Exception) -> Callable[[], None]:
    def task() -> None:
        raise error

    return task


@needs_fork
@pytest.mark.parametrize(
    "error", [TokenlensError("run r: no events"), ValueError("bad value"), KeyError("k")]
)
def test_the_tasks_error_is_raised_here(error: Exception) -> None:
    with beside(_fails(error), "a task", True) as side, pytest.raises(type(error)) as raised:
        side.result()
    assert str(raised.value) == str(error)


class _Unpicklable(Exception):
    def __init__(self, a: int, b: int) -> None:  # pickling calls it with one argument
        super().__init__(f"{a}/{b}")


@needs_fork
def test_an_error_or_value_that_does_not_pickle_is_one_line() -> None:
    error = _fails(_Unpicklable(1, 2))
    expected = pytest.raises(TokenlensError, match=r"^_Unpicklable: 1/2$")
    with beside(error, "a section", True) as side, expected:
        side.result()
    value = beside(lambda: (lambda: 1), "a lambda", True)
    with value as side, pytest.raises(TokenlensError, match="could not come back"):
        side.result()


@needs_fork
def test_a_process_killed_without_an_answer_is_one_line() -> None:
    def killed() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    with beside(killed, "the gap section", True) as side, pytest.raises(TokenlensError) as raised:
        side.result()
    message = str(raised.value)
    assert "\n" not in message and "the gap section" in message
    assert "exit code -9" in message and "--jobs 1" in message


@needs_fork
def test_leaving_without_asking_ends_the_process() -> None:
    with beside(lambda: time.sleep(60), "a sleeper", fork=True) as side:
        process = side._process
        assert process.is_alive()
    assert not process.is_alive() and process.exitcode == -signal.SIGTERM
    with pytest.raises(RuntimeError), beside(lambda: time.sleep(60), "a sleeper", True) as side:
        process = side._process
        raise RuntimeError("the caller failed")
    assert not process.is_alive()


def test_default_jobs_are_the_cores_at_most_the_cap() -> None:
    assert 1 <= default_jobs() <= forked.MAX_JOBS
