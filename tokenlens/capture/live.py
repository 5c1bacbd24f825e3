"""Reading a capture that a running engine is still writing (a served engine; a bench's
engine between cases).

The plugin hands steps to a writer thread that wakes every ``WRITE_SECONDS`` and is
flushed only when its process exits, so a request's last step can still be in memory
when its response has arrived. Reading at once lost it: events one draft short of vLLM's
counters (CI saw it on a loaded machine, where the writer thread starves). Every reader
of a live capture goes through :func:`read_live` (through
:func:`tokenlens.rundir.finalize` with ``live=True``), so the waits are these constants.
"""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa

from tokenlens.capture.events import Capture, build_capture
from tokenlens.capture.filler import filler_rule, mark_fillers
from tokenlens.capture.reconcile import reconcile
from tokenlens.capture.recorder import WRITE_SECONDS
from tokenlens.engine.results import SpecCounters

# First wait: the files unchanged for four of the writer's wake-ups, at most 10 s.
SETTLE_QUIET_S = 4 * WRITE_SECONDS
SETTLE_LIMIT_S = 10.0
# Second wait, once, when the events still fall short of vLLM's counters.
LATE_QUIET_S = 1.0
LATE_LIMIT_S = 30.0


def settle_capture(
    capture: Path, quiet: float = SETTLE_QUIET_S, limit: float = SETTLE_LIMIT_S
) -> None:
    """Wait until the step files in ``capture`` stop changing (``quiet`` seconds without
    a change of any file's size, at most ``limit`` seconds in all)."""

    def sizes() -> dict[str, int]:
        try:
            return {p.name: p.stat().st_size for p in capture.iterdir() if p.is_file()}
        except OSError:
            return {}

    deadline = time.monotonic() + limit
    last, since = sizes(), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(WRITE_SECONDS)
        now = sizes()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return


def read_capture(
    capture: Path,
    requests: pa.Table,
    *,
    id_map: dict[str, str] | None = None,
    keep: set[str] | None = None,
) -> tuple[Capture, pa.Table]:
    """The capture and its events, filler drafts marked (``requests``: the run's)."""
    recorded = build_capture(capture, id_map=id_map, keep=keep)
    events, recorded.fillers = mark_fillers(recorded.table(), requests, filler_rule(capture))
    return recorded, events


def read_live(
    capture: Path,
    requests: pa.Table,
    counters: SpecCounters,
    *,
    id_map: dict[str, str] | None = None,
    keep: set[str] | None = None,
) -> tuple[Capture, pa.Table]:
    """:func:`read_capture` of a capture still being written: settle, read; if the events
    do not match ``counters`` (vLLM's, taken after the last response), settle longer once
    (``LATE_QUIET_S``, at most ``LATE_LIMIT_S``) and read again. The caller judges."""
    settle_capture(capture)
    recorded, events = read_capture(capture, requests, id_map=id_map, keep=keep)
    if reconcile(events, counters, len(recorded.empty_steps)):
        settle_capture(capture, quiet=LATE_QUIET_S, limit=LATE_LIMIT_S)
        recorded, events = read_capture(capture, requests, id_map=id_map, keep=keep)
    return recorded, events
