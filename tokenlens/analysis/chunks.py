"""A run cut into chunks of whole requests, and the chunks joined in order, in worker
processes where there are several chunks and several cores.

:func:`chunk_bounds` decides the chunks (the fewest whole requests, in request order,
with at least a given number of events), :func:`cut` makes a chunk's sub-run, and
:func:`joined_chunks` yields each chunk's rows and what becomes of its :func:`join_run`
frame, in chunk order. With ``jobs`` > 1 and at least two chunks, the first chunk is joined
here (what the join builds once is then built before the fork) and the others in
``jobs`` processes forked from this one (they inherit the run and the vocabulary; only a
chunk's bounds go to a worker, and what the caller's ``finish`` makes of the joined
frame comes back: the files' tables and the figures' columns), at most ``jobs + 1``
chunks ahead of the consumer, so what waits in memory is bounded by the chunk size.
Every chunk is joined by the same function on the same sub-run either way, so the
frames are equal value for value (``tests/analysis/test_chunks.py``). Without ``fork``
(not Linux or macOS) the joins run here, one after another.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from multiprocessing.pool import AsyncResult, Pool
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tokenlens.analysis.forked import can_fork, default_jobs, quiet_fork
from tokenlens.analysis.join import join_run
from tokenlens.arrays import I64
from tokenlens.errors import TokenlensError
from tokenlens.rundir import Run
from tokenlens.text import Vocabulary

CHUNK_TIMEOUT_S = 900.0
"""A worker that has not returned a chunk after this long is taken for stuck (a chunk of
50,000 events joins in about a second): the analysis fails with one line, not a hang."""


@dataclass(frozen=True)
class Bounds:
    """One chunk of a run: requests ``start:stop`` and their events' positions
    (``rows``, in event order); ``whole``: the run as it is (not sliced)."""

    start: int
    stop: int
    rows: I64
    whole: bool = False


def chunk_bounds(run: Run, events: int) -> list[Bounds]:
    """Consecutive slices of whole requests with at least ``events`` events each (the
    last may have fewer; one longer request is a chunk of its own). A run without
    events, or whose events name an unknown or repeated request, is one chunk, the run
    itself, so that :func:`join_run` refuses it with its own message."""
    if run.events is None:
        return [Bounds(0, 0, np.zeros(0, dtype=np.int64), whole=True)]
    rid = run.requests.column("request_id")
    owner = _owners(rid, run.events.column("request_id"))
    if owner is None:
        return [Bounds(0, len(rid), np.arange(run.events.num_rows, dtype=np.int64), True)]
    order = np.argsort(owner, kind="stable")
    per_request = np.bincount(owner, minlength=len(rid))
    ends = np.cumsum(per_request)
    out = []
    start = 0
    while start < len(rid):
        before = int(ends[start - 1]) if start else 0
        stop = int(np.searchsorted(ends, before + events, side="left")) + 1
        stop = min(max(stop, start + 1), len(rid))
        out.append(Bounds(start, stop, np.sort(order[before : int(ends[stop - 1])])))
        start = stop
    return out


def _owners(requests: pa.ChunkedArray, events: pa.ChunkedArray) -> I64 | None:
    """Each event's request as its row in ``requests``; None when a request id is
    repeated or missing, an event names no request, or there is no request."""
    if len(requests) == 0 or requests.null_count or len(pc.unique(requests)) != len(requests):
        return None
    try:
        owner = pc.index_in(events, value_set=requests.combine_chunks())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):  # other types
        return None
    if owner.null_count:
        return None
    return np.asarray(owner.to_numpy(), dtype=np.int64)


def cut(run: Run, bounds: Bounds) -> Run:
    """The sub-run of one chunk: its requests and their events, in event order."""
    if bounds.whole or run.events is None:
        return run
    return replace(
        run,
        requests=run.requests.slice(bounds.start, bounds.stop - bounds.start),
        events=run.events.take(pa.array(bounds.rows)),
    )


Finish = Callable[[Run, pd.DataFrame], Any]
"""What becomes of a chunk's sub-run and joined frame where it was joined (in the
worker): its result is what comes back to the caller."""


def _frame(sub: Run, part: pd.DataFrame) -> pd.DataFrame:
    return part


# What a forked worker joins from: set in the parent just before the fork, so the
# children inherit it (copy on write) instead of receiving the run through a pipe.
_SOURCE: tuple[Run, str, Vocabulary, Finish] | None = None


def _joined(run: Run, label: str, vocab: Vocabulary, finish: Finish, bounds: Bounds) -> Any:
    """One chunk cut, joined and finished (here or in a worker)."""
    sub = cut(run, bounds)
    return finish(sub, join_run(sub, label, vocab))


def _join(bounds: Bounds) -> Any:
    """One chunk's join and finish, in a worker."""
    assert _SOURCE is not None, "joined_chunks sets the source before forking"
    return _joined(*_SOURCE, bounds)


def joined_chunks(
    run: Run,
    label: str,
    vocab: Vocabulary,
    events: int,
    jobs: int | None = None,
    finish: Finish = _frame,
) -> Iterator[tuple[I64, Any]]:
    """``(rows, finish(sub-run, joined frame))`` of each chunk of ``run``, in chunk
    order (by default the joined frame itself). ``jobs``: processes for the joins
    (None: :func:`default_jobs`; 1: none forked); ``finish`` runs in the process that
    joined the chunk, so what it makes of the frame need not come back whole."""
    chunks = chunk_bounds(run, events)
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 2 or len(chunks) < 2 or not can_fork():
        for bounds in chunks:
            yield bounds.rows, _joined(run, label, vocab, finish, bounds)
        return
    # The first chunk is joined here: what the join builds once (the code-point class
    # table, the vocabulary's tables, MeCab) is then built before the fork, not per worker.
    yield chunks[0].rows, _joined(run, label, vocab, finish, chunks[0])
    global _SOURCE
    _SOURCE = (run, label, vocab, finish)
    try:
        with _forked_pool(min(jobs, len(chunks) - 1)) as pool:
            todo = iter(chunks[1:])
            pending: deque[tuple[Bounds, AsyncResult[Any]]] = deque()
            for bounds in todo:
                pending.append((bounds, pool.apply_async(_join, (bounds,))))
                if len(pending) > jobs:
                    break
            while pending:
                bounds, result = pending.popleft()
                try:
                    done = result.get(timeout=CHUNK_TIMEOUT_S)
                except multiprocessing.TimeoutError:
                    raise TokenlensError(
                        f"analyze: a join worker returned nothing for {CHUNK_TIMEOUT_S:.0f} s "
                        f"(run {label}, requests {bounds.start}-{bounds.stop}); "
                        "re-run with --jobs 1"
                    ) from None
                following = next(todo, None)
                if following is not None:
                    pending.append((following, pool.apply_async(_join, (following,))))
                yield bounds.rows, done
    finally:
        _SOURCE = None


@contextlib.contextmanager
def _forked_pool(processes: int) -> Iterator[Pool]:
    """A pool of ``processes`` forked workers, terminated on the way out."""
    with quiet_fork():
        pool = multiprocessing.get_context("fork").Pool(processes)
    try:
        yield pool
    finally:
        pool.terminate()
        pool.join()
