"""Committed run directories are in the format the current code writes.

The real traces in tests/data and the runs under reports/ cannot be regenerated
without vLLM, so they are checked against the code instead: the reader accepts them,
every column they have is one the writer writes, with the writer's type, the only
columns they may lack are those added after run directories were first written
(``REQUESTS_OPTIONAL``, which readers fill with nulls), and their events reconcile with
their counters.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support import REPO
from tokenlens.capture.events import EVENTS_SCHEMA, EVENTS_WRITE_SCHEMA
from tokenlens.capture.reconcile import reconcile
from tokenlens.rundir import (
    EVENTS,
    REQUESTS,
    REQUESTS_OPTIONAL,
    REQUESTS_WRITE_SCHEMA,
    read_run,
)

RUNS = sorted(
    path
    for pattern in ("tests/data/run-*", "reports/*/runs/*", "reports/*/traces/*")
    for path in REPO.glob(pattern)
    if path.is_dir()
)


def test_the_committed_runs_are_found() -> None:
    assert {p.name for p in RUNS} >= {"run-dm3", "run-ngram"}


@pytest.mark.parametrize("path", RUNS, ids=lambda p: str(p.relative_to(REPO)))
def test_committed_run_is_in_the_current_format(path: Path) -> None:
    run = read_run(path)  # manifest keys, required columns and their types
    assert run.complete
    requests = pq.read_schema(path / REQUESTS)
    stale = [
        f"{f.name}: {f.type}"
        for f in requests
        if f.name not in REQUESTS_WRITE_SCHEMA.names
        or REQUESTS_WRITE_SCHEMA.field(f.name).type != f.type
    ]
    assert not stale, f"columns the writer does not write (as such): {stale}"
    missing = set(REQUESTS_WRITE_SCHEMA.names) - set(requests.names)
    assert missing <= set(REQUESTS_OPTIONAL.names), f"missing columns: {sorted(missing)}"
    events = pq.read_schema(path / EVENTS)  # written before per-step k, or with it
    assert any(events.equals(s, check_metadata=False) for s in (EVENTS_SCHEMA, EVENTS_WRITE_SCHEMA))
    assert run.events is not None
    assert reconcile(run.events, run.metrics) == []
