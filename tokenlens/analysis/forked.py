"""Work in processes forked from this one, for ``analyze``'s ``--jobs``.

A forked process inherits this one's memory (copy on write): what it reads (a run, the
study's frame) is never sent through a pipe; only its result comes back. Used by the
join (:mod:`tokenlens.analysis.chunks`: a pool of workers over a run's chunks) and by
the figures (:func:`beside`: one section computed while this process computes the
others). Without ``fork`` (not Linux or macOS) the work runs here, one after another.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import signal
import warnings
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any, Generic, TypeVar

from tokenlens.errors import TokenlensError

R = TypeVar("R")

MAX_JOBS = 4
"""The default number of processes: the cores, at most this many (each join worker
holds a copy of the chunk it joins and of the classifier's working arrays)."""


def default_jobs() -> int:
    """The cores this process may use, at most :data:`MAX_JOBS`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_JOBS))


def can_fork() -> bool:
    """Whether this platform forks (Linux, macOS)."""
    return "fork" in multiprocessing.get_all_start_methods()


@contextlib.contextmanager
def quiet_fork() -> Iterator[None]:
    """Around the creation of forked processes: the tokenizers library told that the
    children will not use its threads (it warns in every forked child otherwise), and
    Python 3.12's warning on forking a process with threads (Arrow's pool) silenced:
    the children run only numpy, pandas and Arrow code, whose libraries re-create
    their threads."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


class Beside(Generic[R]):
    """A task started by :func:`beside`; :meth:`result` waits for its value."""

    def __init__(self, task: Callable[[], R], what: str) -> None:
        self._task: Callable[[], R] | None = task
        self._what = what
        self._value: tuple[R] | None = None
        self._process: Any = None
        self._conn: Connection | None = None

    def start(self) -> None:
        """Fork the process that runs the task (it inherits the task, not a copy of
        it through a pipe)."""
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        with quiet_fork():
            self._process = context.Process(
                target=_run, args=(self._task, send), name=f"tokenlens {self._what}"
            )
            self._process.start()
        send.close()
        self._conn = receive
        self._task = None  # the child has its own; nothing of it is held here

    def result(self) -> R:
        """The task's value; its error raised here (the same type and message), or one
        line if the process ended without an answer (killed: out of memory)."""
        if self._value is None:
            if self._conn is None:
                assert self._task is not None
                self._value = (self._task(),)
                self._task = None
            else:
                self._value = (self._receive(),)
        return self._value[0]

    def _receive(self) -> R:
        assert self._conn is not None
        try:
            ok, value = self._conn.recv()
        except EOFError:
            self._process.join()
            raise TokenlensError(
                f"analyze: the process computing {self._what} ended without an answer "
                f"(exit code {self._process.exitcode}; out of memory?); re-run with --jobs 1"
            ) from None
        finally:
            self._conn.close()
            self._conn = None
        self._process.join()
        if not ok:
            raise value
        result: R = value
        return result

    def stop(self) -> None:
        """End the process if it still runs (the caller failed or did not ask)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None and self._process.is_alive():
            self._process.terminate()
        if self._process is not None:
            self._process.join()


def _run(task: Callable[[], Any], send: Connection) -> None:
    """In the forked process: the task's value, or its error, sent back. Ctrl-C is the
    caller's to answer (it ends this process, as SIGTERM does, without a word)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        answer: tuple[bool, Any] = (True, task())
    except Exception as error:  # every error goes back to the caller
        answer = (False, _portable(error))
    try:
        send.send(answer)
    except OSError:
        pass  # the caller stopped listening: it failed, or was stopped
    except Exception as error:  # a value that does not pickle
        with contextlib.suppress(OSError):
            send.send((False, TokenlensError(f"analyze: a result could not come back ({error})")))
    finally:
        send.close()


def _portable(error: BaseException) -> BaseException:
    """``error`` if it survives pickling (its type and message), else one that does."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return TokenlensError(f"{type(error).__name__}: {error}")
    error.__traceback__ = None
    return error


@contextlib.contextmanager
def beside(task: Callable[[], R], what: str, fork: bool) -> Iterator[Beside[R]]:
    """``task`` run in a forked process while the caller goes on (``fork`` and a
    platform that forks), else here when its result is asked. The context's value
    gives the result (:meth:`Beside.result`); leaving the context ends the process if
    it still runs. ``what`` names the work in the one-line error of a process that ends
    without an answer."""
    side = Beside(task, what)
    if fork and can_fork():
        side.start()
    try:
        yield side
    finally:
        side.stop()
