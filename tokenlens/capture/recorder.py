"""Append-only, crash-safe step files written inside vLLM's engine processes.

One file per process (``steps-<host>-<pid>.jsonl``; the model runner's draft ids go to
``drafts-<host>-<pid>.jsonl``): engines of a data-parallel deployment never share a
file. Each scheduler step is one JSON line.

Serialising and writing happen on a writer thread, off the scheduler's thread: the
hook only hands over the step's records (a queue put), and the writer turns them into
lines, writes and flushes them, usually while the scheduler waits for the model. Lines
are written in step order and each batch is flushed at once, so a SIGKILL loses at
most the steps still queued (a suffix, never a gap; normally none) plus a torn last
line, which readers skip. The queue is drained on close, at interpreter exit and at a
multiprocessing child's exit. ``os.fsync`` runs at most every ``FSYNC_SECONDS`` to
bound what a power loss could take without paying a disk sync per step.
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
import queue
import socket
import threading
import time
from collections.abc import Callable
from multiprocessing import util as mp_util
from pathlib import Path
from typing import Any, TextIO

FSYNC_SECONDS = 2.0
_STOP = None


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
        self._queue: queue.Queue[dict[str, Any] | None] | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # Seconds the writer thread spent serialising and writing, not yet reported.
        self._writer_s = 0.0
        self.error: str | None = None  # why the writer thread stopped writing

    @property
    def path(self) -> Path:
        return self.directory / f"{self.prefix}-{socket.gethostname()}-{os.getpid()}.jsonl"

    def _open(self) -> TextIO:
        if self._fh is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        return self._fh

    def write_step(
        self, records: list[dict[str, Any]], timing: dict[str, float | None] | None = None
    ) -> None:
        """One line: ``{"seq", "t", ["h", "w", "wt",] "reqs": [...]}``.

        ``timing`` is the hook's own cost (see :mod:`tokenlens.capture.plugin`); the
        writer adds ``wt``, its own seconds since the previous line.
        """
        self._put({"seq": self._seq, "t": time.time(), **(timing or {}), "reqs": records})

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
        if self._queue is None:
            self._start()
        assert self._queue is not None
        self._queue.put(line)

    def _start(self) -> None:
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="tokenlens-writer", daemon=True)
        self._thread.start()
        atexit.register(self.close)
        mp_util.Finalize(self, self.close, exitpriority=100)  # multiprocessing children

    def _run(self) -> None:
        assert self._queue is not None
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            lines = [line for line in batch if line is not _STOP]
            t0 = time.perf_counter()
            if lines and self.error is None:
                try:
                    self._write(lines)
                except Exception as exc:  # keep draining: never block the scheduler
                    self.error = f"{type(exc).__name__}: {exc}"
            self._writer_s += time.perf_counter() - t0
            for _ in batch:
                self._queue.task_done()
            if len(lines) != len(batch):
                return

    def _write(self, lines: list[dict[str, Any]]) -> None:
        with self._lock:
            fh = self._open()
            for line in lines:
                if callable(line["reqs"]):
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
        """Wait until every queued step is written and flushed."""
        if self._queue is not None and self._thread is not None and self._thread.is_alive():
            self._queue.join()

    def close(self) -> None:
        """Drain the queue, stop the writer, sync and close the file (idempotent)."""
        thread, self._thread = self._thread, None
        if thread is not None and thread.is_alive() and self._queue is not None:
            self._queue.put(_STOP)
            thread.join(timeout=30)
        self._queue = None
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
    return Path(directory) / f"{prefix}-{socket.gethostname()}-{os.getpid()}.json"


def write_status(directory: str | Path, data: dict[str, Any]) -> None:
    """This process's capture status (tier, scheduler, failures), replaced atomically.

    Written when the hook first sees a scheduler, and again if the capture fails or is
    refused: rare events, so a whole-file rewrite is fine.
    """
    write_json_status(directory, "capture", data)


def write_json_status(directory: str | Path, prefix: str, data: dict[str, Any]) -> None:
    """``<prefix>-<host>-<pid>.json`` in ``directory``, replaced atomically."""
    path = status_path(directory, prefix)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
