"""Append-only, crash-safe step files written inside vLLM's engine processes.

One file per process (``steps-<tag>.jsonl``; the model runner's draft ids go to
``drafts-<tag>.jsonl``, status files to ``<prefix>-<tag>.json``), where ``<tag>`` is
:func:`process_tag`: host, pid and a random part drawn once per process. Engine cores
of a data-parallel deployment and the ranks of a tensor-parallel one never share a
file, also across hosts that share a name and a trace directory, or a pid reused
inside a container. Each scheduler step is one JSON line.

Serialising and writing happen on a writer thread, off the scheduler's thread: the
hook only hands over the step's columns (a deque append: no lock, no wake-up), and the
writer, waking every ``WRITE_SECONDS``, turns them into lines, writes and flushes them.
Lines are written in step order and each batch is flushed at once, so a SIGKILL loses
at most the steps handed over since the last wake-up (a suffix, never a gap; at most
``WRITE_SECONDS`` of steps) plus a torn last line, which readers skip. What is pending
is written on close, at interpreter exit and at a multiprocessing child's exit.
``os.fsync`` runs at most every ``FSYNC_SECONDS`` to bound what a power loss could take
without paying a disk sync per step.
``background=False`` writes on the caller's thread (each line flushed before
``write_step`` returns).

A line's records may also be handed over unfinished (:meth:`StepRecorder.write_lazy`):
a function the writer thread calls to make them. The model runner's hook uses it to
wait for a device-to-host copy off the thread that drives the GPU.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing import util as mp_util
from pathlib import Path
from typing import Any, TextIO

FSYNC_SECONDS = 2.0
# The writer wakes this often (and on flush/close), never per step: a wake-up per step
# handed the GIL to the writer right when the scheduler needed it again (measured on
# vLLM's real Scheduler at batch 64: update_from_output 5.1 ms hooked vs 0.8 ms).
WRITE_SECONDS = 0.05
_tag: tuple[int, str] | None = None  # (pid, tag): drawn again in a forked child


def process_tag() -> str:
    """``<host>-<pid>-<6 hex>``: this process's part of every file name it writes.

    The random part is drawn once per process (again after a fork, which changes the
    pid), so two processes never write the same file, whatever their hosts and pids.
    """
    global _tag
    pid = os.getpid()
    if _tag is None or _tag[0] != pid:
        _tag = (pid, f"{socket.gethostname()}-{pid}-{secrets.token_hex(3)}")
    return _tag[1]


class StepRecorder:
    """Writes step records for one engine process; the file opens on first use."""

    def __init__(
        self, directory: str | Path, background: bool = True, prefix: str = "steps"
    ) -> None:
        self.directory = Path(directory)
        self.background = background
        self.prefix = prefix
        self._fh: TextIO | None = None
        self._seq = 0
        self._last_sync = time.monotonic()
        # Lines handed over and not yet written (deque appends are atomic: no lock on
        # the scheduler's thread), the writer, its wake-up and stop flags.
        self._pending: deque[dict[str, Any]] = deque()
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._stop = False
        self._written = 0
        self._lock = threading.Lock()
        # CPU seconds the writer thread spent serialising and writing, not yet reported
        # (thread CPU time: the GIL it held, which is what it costs the scheduler; its
        # wall time also counts the waits for the GIL that the scheduler held).
        self._writer_s = 0.0
        self.error: str | None = None  # why the writer thread stopped writing

    @property
    def path(self) -> Path:
        return self.directory / f"{self.prefix}-{process_tag()}.jsonl"

    def _open(self) -> TextIO:
        if self._fh is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        return self._fh

    def write_step(
        self, records: list[dict[str, Any]], timing: dict[str, float | None] | None = None
    ) -> None:
        """One line: ``{"seq", "t", ["h", "w", "wt",] "reqs": [...]}`` (records).

        ``timing`` is the hook's own cost (see :mod:`tokenlens.capture.plugin`); the
        writer adds ``wt``, its own seconds since the previous line.
        """
        self._put({"seq": self._seq, "t": time.time(), **(timing or {}), "reqs": records})

    def write_columns(
        self, columns: dict[str, Any], timing: dict[str, float | None] | None = None
    ) -> None:
        """One line whose step is held as columns (``cols``, :mod:`.step_records`)."""
        self._put({"seq": self._seq, "t": time.time(), **(timing or {}), "cols": columns})

    def write_lazy(self, make: Callable[[], list[dict[str, Any]]]) -> None:
        """One line whose records ``make()`` builds on the writer thread.

        ``make`` may block (a device copy to wait for) without holding up the caller;
        an empty list writes no line. Without a writer thread it runs at once.
        """
        self._put({"seq": self._seq, "t": time.time(), "reqs": make})

    def _put(self, line: dict[str, Any]) -> None:
        self._seq += 1
        if not self.background:
            self._write([line])
            return
        if self._thread is None:
            self._start()
        self._pending.append(line)  # no lock, no wake-up: see WRITE_SECONDS

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tokenlens-writer", daemon=True)
        self._thread.start()
        atexit.register(self.close)
        mp_util.Finalize(self, self.close, exitpriority=100)  # multiprocessing children

    def _run(self) -> None:
        while True:
            self._wake.wait(WRITE_SECONDS)
            self._wake.clear()
            stop = self._stop
            batch = []
            while self._pending:
                batch.append(self._pending.popleft())
            t0 = time.thread_time()  # CPU time: its waits for the GIL are not its cost
            if batch and self.error is None:
                try:
                    self._write(batch)
                except Exception as exc:  # keep draining: never block the scheduler
                    self.error = f"{type(exc).__name__}: {exc}"
            self._writer_s += time.thread_time() - t0
            self._written += len(batch)
            if stop and not self._pending:
                return

    def _write(self, lines: list[dict[str, Any]]) -> None:
        with self._lock:
            fh = self._open()
            for line in lines:
                if callable(line.get("reqs")):
                    line["reqs"] = line["reqs"]()
                    if not line["reqs"]:
                        continue
                if self.background:
                    line["wt"] = round(self._writer_s, 7)
                    self._writer_s = 0.0
                fh.write(json.dumps(line, separators=(",", ":"), default=_plain) + "\n")
            fh.flush()
            now = time.monotonic()
            if now - self._last_sync >= FSYNC_SECONDS:
                os.fsync(fh.fileno())
                self._last_sync = now

    def flush(self) -> None:
        """Wait until every step handed over so far is written and flushed."""
        target = self._seq
        while self._thread is not None and self._thread.is_alive() and self._written < target:
            self._wake.set()
            time.sleep(0.002)

    def close(self) -> None:
        """Drain what is pending, stop the writer, sync and close the file (idempotent)."""
        thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive():
            self._stop = True
            self._wake.set()
            thread.join(timeout=30)
        self._stop = False
        with self._lock:
            if self._fh is not None:
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._fh.close()
                self._fh = None


def _plain(value: Any) -> Any:
    """JSON for numpy scalars and arrays inside records (``int(x)``, ``tolist()``)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return int(value)


def status_path(directory: str | Path, prefix: str = "capture") -> Path:
    return Path(directory) / f"{prefix}-{process_tag()}.json"


def write_status(directory: str | Path, data: dict[str, Any]) -> None:
    """This process's capture status (tier, scheduler, failures), replaced atomically.

    Written when the hook first sees a scheduler, and again if the capture fails or is
    refused: rare events, so a whole-file rewrite is fine. ``pid`` and ``tag`` (this
    process's part of its file names) are the writing process's, also in a process
    forked after the hook was installed.
    """
    write_json_status(directory, "capture", {"pid": os.getpid(), "tag": process_tag(), **data})


def write_json_status(directory: str | Path, prefix: str, data: dict[str, Any]) -> None:
    """``<prefix>-<tag>.json`` in ``directory`` (:func:`process_tag`), replaced atomically."""
    path = status_path(directory, prefix)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
