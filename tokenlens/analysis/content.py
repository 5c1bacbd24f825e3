"""What the analysis reads of a run, as one digest: two runs with equal content are one.

:func:`content_key` hashes a run's requests (id, output ids, text) and events (request,
step, position, verdict, emitted and judged draft ids) as sets: sorted by their keys,
so row order, chunking and file metadata do not count. The input checks compare the
keys of one analysis' runs (:mod:`tokenlens.analysis.inputs`); no key is written.
"""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.compute as pc

from tokenlens.capture.events import EVENTS_SCHEMA
from tokenlens.rundir import Run

DIGEST_ROWS = 65_536
"""Rows per record batch of a content digest: the sorted table is hashed a batch at a
time, never held sorted or serialised whole."""


class _HashingFile:
    """A writable file that only feeds what is written to a hash."""

    closed = False

    def __init__(self) -> None:
        self.hash = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _digest(table: pa.Table, keys: list[str]) -> bytes:
    """Hash of a table's rows as a set: sorted by ``keys`` first, so row order, chunking
    and file metadata do not count (a resumed run lists its requests in another order).
    The rows go to the hash in sorted batches of :data:`DIGEST_ROWS` (an Arrow IPC
    stream): what it holds is the sort order and one batch. The value is compared only
    within one analysis (two runs with equal content), never written."""
    # one chunk per column first: a take from a column of many chunks cost time in
    # proportion to the whole column per batch (19.6 s against 1.5 s for one run of
    # 5.2 million events), at the price of one transient copy of the hashed columns
    table = table.combine_chunks()
    order = pc.sort_indices(table, sort_keys=[(key, "ascending") for key in keys])
    schema = table.schema.remove_metadata()
    sink = _HashingFile()
    with pa.ipc.new_stream(pa.PythonFile(sink, mode="w"), schema) as writer:
        for start in range(0, len(order), DIGEST_ROWS):
            rows = table.take(order.slice(start, DIGEST_ROWS))
            writer.write_table(rows.replace_schema_metadata(None), max_chunksize=DIGEST_ROWS)
    return sink.hash.digest()


CONTENT_EVENT_COLUMNS = (
    "request_id",
    "step",
    "position",
    "accepted",
    "emitted_token_id",
    "output_index",
    "draft_token_id",
)


def content_key(run: Run) -> bytes:
    """What the analysis reads of a run, independent of row order (equal: the same data).

    Requests by id with their output ids and text; events by (request, step, position)
    with what was judged. A draft id after the first rejection of a step was never
    compared with the target and enters no figure; a trace records it and a replay
    leaves it -1, so it is read as -1 here: a replay equal to its trace is the same data.
    """
    assert run.events is not None
    requests = run.requests.select(["request_id", "output_token_ids", "output_text"])
    events = run.events
    columns = {}
    for name in CONTENT_EVENT_COLUMNS:
        column = events.column(name).cast(EVENTS_SCHEMA.field(name).type)
        if name == "draft_token_id":
            judged = pc.is_valid(events.column("emitted_token_id").cast(pa.int64()))
            column = pc.if_else(judged, column, pa.scalar(-1, pa.int64()))
        columns[name] = column
    return _digest(requests, ["request_id"]) + _digest(
        pa.table(columns), ["request_id", "step", "position"]
    )
