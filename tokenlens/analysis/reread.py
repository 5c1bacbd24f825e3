"""A checked run read again at its join, so that ``analyze`` holds one run's tables at a time.

The input checks (:func:`tokenlens.analysis.inputs.validate_inputs`) read each run
once and keep none of its tables (:mod:`tokenlens.analysis.run_facts`). What they
decide about a run's rows is small: the confidences of non-finite logprobs are
excluded (:func:`~tokenlens.analysis.damage.exclude_nonfinite`, a pure function of the
run) and requests another run keeps are left out (``--overlap keep-longest``).
:class:`Snapshot` records that, with the size and modification time of the run's
tables as they were before it was read; :func:`reread` reads the run again just before
its join and applies the same decisions. A run whose files changed
in between (a trace still writing, a copy over it) is refused in one line, never joined
as something other than what was checked.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from tokenlens.analysis.damage import exclude_nonfinite
from tokenlens.errors import TokenlensError
from tokenlens.rundir import EVENTS, REQUESTS, Run, read_run

Stamp = tuple[tuple[str, int, int], ...]
"""``(file name, size, modification time in ns)`` of a run's tables."""


def stamp(path: Path) -> Stamp:
    """The size and modification time of ``path``'s requests and events tables."""
    out = []
    for name in (REQUESTS, EVENTS):
        try:
            info = (path / name).stat()
        except OSError:
            continue  # not there: read_run says so, or the run has no events file
        out.append((name, info.st_size, info.st_mtime_ns))
    return tuple(out)


@dataclass(frozen=True)
class Snapshot:
    """What the checks decided about one run's rows, and its files as they were read."""

    path: Path
    files: Stamp
    requests: int  # rows of the checked run
    events: int
    kept: frozenset[str] | None  # request ids left by the overlap rule; None: all


def without_tables(run: Run) -> Run:
    """``run`` without its requests' rows and its events (manifest, path and counters
    kept). An empty table of the same schema, not an empty slice: a slice keeps every
    buffer of the table it was cut from (at 1.55 million events, 138 MiB of the two
    runs' requests were held through the figures that way)."""
    return replace(run, requests=run.requests.schema.empty_table(), events=None)


def reread(run: Run, snap: Snapshot) -> Run:
    """``run`` (the checked run without its tables: manifest and counters) with its
    requests and events read again and the checks' decisions applied; a run whose
    files changed since the checks (before or while it is read again) is refused in
    one line."""
    _unchanged(snap)
    fresh, _ = exclude_nonfinite(read_run(snap.path))
    if snap.kept is not None:  # as overlap.resolve_overlap left it
        fresh = only_requests(fresh, pa.array(sorted(snap.kept), pa.string()))
    requests, events = fresh.requests, fresh.events
    _unchanged(snap)
    rows = (requests.num_rows, events.num_rows if events is not None else 0)
    if rows != (snap.requests, snap.events):
        raise TokenlensError(
            f"{snap.path}: read again for its join, it holds {rows[0]} requests and "
            f"{rows[1]} events where the input checks left {snap.requests} and "
            f"{snap.events} (a bug: please report it)"
        )
    return replace(run, requests=requests, events=events)


def _unchanged(snap: Snapshot) -> None:
    """Refuse, in one line, a run whose tables are not as the checks read them."""
    changed = _changed(snap)
    if changed is not None:
        raise TokenlensError(
            f"{snap.path}: {changed} changed while analyze read it (a trace still writing, "
            "or a file replaced): analyse the run again once it no longer changes"
        )


def _changed(snap: Snapshot) -> str | None:
    """The first table of ``snap`` whose size or modification time is not as recorded."""
    now = dict((name, (size, when)) for name, size, when in stamp(snap.path))
    for name, size, when in snap.files:
        if now.get(name) != (size, when):
            return name
    extra = set(now) - {name for name, _, _ in snap.files}
    return sorted(extra)[0] if extra else None


def only_requests(run: Run, ids: pa.Array) -> Run:
    """``run`` with only the requests whose id is in ``ids`` and their events, in their
    order (request ids are unique: the input checks); its counters as they were."""
    requests = run.requests.filter(pc.is_in(run.requests.column("request_id"), value_set=ids))
    events = run.events
    if events is not None:
        events = events.filter(pc.is_in(events.column("request_id"), value_set=ids))
    return replace(run, requests=requests, events=events)
