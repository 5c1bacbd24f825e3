"""Append-only, crash-safe step files written inside vLLM's engine processes.

One file per process (``steps-<host>-<pid>.jsonl``): engines of a data-parallel
deployment never share a file. Each scheduler step is one JSON line, written and
flushed before the step returns, so a SIGKILL loses at most the line being written;
readers skip a torn last line. ``os.fsync`` runs at most every ``FSYNC_SECONDS`` to
bound what a power loss could take without paying a disk sync per step.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any, TextIO

FSYNC_SECONDS = 2.0


class StepRecorder:
    """Writes step records for one engine process; the file opens on first use."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._fh: TextIO | None = None
        self._seq = 0
        self._last_sync = time.monotonic()

    @property
    def path(self) -> Path:
        return self.directory / f"steps-{socket.gethostname()}-{os.getpid()}.jsonl"

    def _open(self) -> TextIO:
        if self._fh is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        return self._fh

    def write_step(
        self, records: list[dict[str, Any]], timing: dict[str, float | None] | None = None
    ) -> None:
        """One line: ``{"seq", "t", "reqs": [...]}`` (+ the hook's timing); flushed."""
        fh = self._open()
        line = {"seq": self._seq, "t": time.time(), **(timing or {}), "reqs": records}
        fh.write(json.dumps(line, separators=(",", ":")) + "\n")
        fh.flush()
        self._seq += 1
        now = time.monotonic()
        if now - self._last_sync >= FSYNC_SECONDS:
            os.fsync(fh.fileno())
            self._last_sync = now

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None


def status_path(directory: str | Path) -> Path:
    return Path(directory) / f"capture-{socket.gethostname()}-{os.getpid()}.json"


def write_status(directory: str | Path, data: dict[str, Any]) -> None:
    """This process's capture status (tier, scheduler, failures), replaced atomically.

    Written when the hook first sees a scheduler, and again if the capture fails or is
    refused: rare events, so a whole-file rewrite is fine.
    """
    path = status_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
