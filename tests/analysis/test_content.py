"""Content keys (:mod:`tokenlens.analysis.content`): equal for the same rows in any
order and chunking, different for one changed value, across batch boundaries."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pytest

from tests.support import REPO
from tokenlens.analysis import content
from tokenlens.analysis.content import content_key
from tokenlens.rundir import read_run

RUN = sorted(p for p in (REPO / "reports" / "demo" / "runs").iterdir() if p.is_dir())[0]


@pytest.mark.parametrize("batch", [7, content.DIGEST_ROWS], ids=["small batches", "default"])
def test_the_key_is_of_the_rows_as_a_set(batch: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(content, "DIGEST_ROWS", batch)
    run = read_run(RUN)
    assert run.events is not None
    if batch == 7:  # the small batches cut the rows in several places
        assert run.events.num_rows > 3 * batch
    key = content_key(run)
    # reversed rows, in chunks of 5, with file metadata: the same key
    events = run.events.take(pa.array(range(run.events.num_rows - 1, -1, -1)))
    events = pa.Table.from_batches(events.to_batches(max_chunksize=5))
    requests = run.requests.take(pa.array(range(run.requests.num_rows - 1, -1, -1)))
    shuffled = replace(run, events=events.replace_schema_metadata({"x": "y"}), requests=requests)
    assert content_key(shuffled) == key
    # one accepted flag flipped: another key
    flags = run.events.column("accepted").to_pylist()
    flags[-1] = not flags[-1]
    changed = run.events.set_column(
        run.events.schema.get_field_index("accepted"),
        run.events.schema.field("accepted"),
        pa.array(flags, type=run.events.schema.field("accepted").type),
    )
    assert content_key(replace(run, events=changed)) != key
