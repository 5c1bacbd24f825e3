"""The chunks of a run joined in forked workers are the chunks joined here.

:func:`tokenlens.analysis.chunks.joined_chunks` with ``jobs`` > 1 forks workers that
join each chunk of the committed demo runs; every chunk's frame, sub-run and rows must
equal the serial path's, in the same order, and the frames must really come from other
processes. A worker's failure reaches the caller as the join's own error.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from tests.support import REPO
from tokenlens.analysis import chunks as chunks_module
from tokenlens.analysis.chunks import chunk_bounds, joined_chunks
from tokenlens.analysis.join import join_run, run_vocabulary
from tokenlens.errors import TokenlensError
from tokenlens.rundir import Run, read_run
from tokenlens.text import Vocabulary

RUNS = tuple(sorted(p for p in (REPO / "reports" / "demo" / "runs").iterdir() if p.is_dir()))


def _with_pid(run: Run, label: str, vocab: Vocabulary) -> pd.DataFrame:
    """The join, with the process that ran it in a column of its own."""
    return join_run(run, label, vocab).assign(joined_by=os.getpid())


def _requests_and_frame(sub: Run, part: pd.DataFrame) -> tuple[list[str], pd.DataFrame]:
    """What the finish step sees: the chunk's request ids, and its frame."""
    return sub.requests.column("request_id").to_pylist(), part


@pytest.mark.parametrize("path", RUNS[:2], ids=lambda p: p.name)
def test_forked_joins_equal_the_serial_joins(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = read_run(path)
    vocab = run_vocabulary(run, None)
    monkeypatch.setattr(chunks_module, "join_run", _with_pid)
    serial = list(joined_chunks(run, "r", vocab, 40, 1, _requests_and_frame))
    forked = list(joined_chunks(run, "r", vocab, 40, 2, _requests_and_frame))
    assert len(serial) == len(chunk_bounds(run, 40)) > 3
    assert len(forked) == len(serial)
    for (rows_s, (ids_s, part_s)), (rows_f, (ids_f, part_f)) in zip(serial, forked, strict=True):
        assert (rows_s == rows_f).all() and ids_s == ids_f
        pd.testing.assert_frame_equal(
            part_s.drop(columns="joined_by"), part_f.drop(columns="joined_by"), check_exact=True
        )
    assert set(pd.concat(p for _, (_, p) in serial)["joined_by"]) == {os.getpid()}
    # the first chunk here (the join's caches are built before the fork), then 2 workers
    first, *others = (set(p["joined_by"]) for _, (_, p) in forked)
    assert first == {os.getpid()}
    workers = set().union(*others)
    assert os.getpid() not in workers and len(workers) == 2
    assert chunks_module._SOURCE is None  # nothing of the run is kept for the next fork


def test_a_workers_error_is_the_callers(monkeypatch: pytest.MonkeyPatch) -> None:
    run = read_run(RUNS[0])
    vocab = run_vocabulary(run, None)
    third = run.requests.column("request_id")[chunk_bounds(run, 40)[2].start].as_py()

    def failing(sub: Run, label: str, vocab: Vocabulary) -> pd.DataFrame:
        if sub.requests.column("request_id")[0].as_py() == third and os.getpid() != parent:
            raise TokenlensError("analyze: chunk three is broken")
        return join_run(sub, label, vocab)

    parent = os.getpid()
    monkeypatch.setattr(chunks_module, "join_run", failing)
    got = []
    with pytest.raises(TokenlensError, match="chunk three is broken"):
        for rows, _part in joined_chunks(run, "r", vocab, 40, jobs=2):
            got.append(rows)
    assert len(got) >= 1  # the chunks before it came through first
    assert chunks_module._SOURCE is None


def test_one_chunk_or_one_job_forks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    run = read_run(RUNS[0])
    vocab = run_vocabulary(run, None)
    monkeypatch.setattr(chunks_module, "join_run", _with_pid)
    for events, jobs in ((10**9, 4), (40, 1)):
        parts = [p for _, p in joined_chunks(run, "r", vocab, events, jobs=jobs)]
        assert set(pd.concat(parts)["joined_by"]) == {os.getpid()}


def test_runs_the_chunks_cannot_cut_are_one_chunk() -> None:
    """A repeated request id, or an event of no request, leaves the run whole (the
    join then refuses it with its own message)."""
    from dataclasses import replace

    import pyarrow as pa

    run = read_run(RUNS[0])
    assert len(chunk_bounds(run, 40)) > 3
    ids = run.requests.column("request_id").to_pylist()
    repeated = run.requests.set_column(
        run.requests.schema.get_field_index("request_id"),
        "request_id",
        pa.array([ids[0], *ids[:-1]], type=run.requests.schema.field("request_id").type),
    )
    stranger = run.events.set_column(  # type: ignore[union-attr]
        run.events.schema.get_field_index("request_id"),  # type: ignore[union-attr]
        "request_id",
        pa.array(
            ["no-such-request", *run.events.column("request_id").to_pylist()[1:]],  # type: ignore[union-attr]
            type=run.events.schema.field("request_id").type,  # type: ignore[union-attr]
        ),
    )
    for broken in (replace(run, requests=repeated), replace(run, events=stranger)):
        (only,) = chunk_bounds(broken, 40)
        assert only.whole and len(only.rows) == broken.events.num_rows  # type: ignore[union-attr]


def test_analyze_jobs_option_changes_no_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tokenlens analyze --jobs 2`` (two forked workers over 40-event chunks, the
    gap and rejection sections in a forked process of their own) writes the summary
    ``--jobs 1`` writes, digit for digit."""
    import importlib
    import json

    from tests.support import cli
    from tokenlens.analysis import stream

    summarize_module = importlib.import_module("tokenlens.analysis.summarize")
    monkeypatch.setattr(stream, "CHUNK_EVENTS", 40)
    monkeypatch.setattr(summarize_module, "ASIDE_MIN_ROWS", 0)  # the demo is small
    aside = summarize_module._aside
    where = tmp_path / "aside.pid"

    def noted(*args: object) -> object:
        where.write_text(str(os.getpid()))
        return aside(*args)

    monkeypatch.setattr(summarize_module, "_aside", noted)
    written, ran_in = [], []
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs{jobs}"
        args = [str(RUNS[0]), str(RUNS[1]), "--out", str(out), "--jobs", jobs]
        status, _, err = cli(["analyze", *args, "--quiet", "--bootstrap", "10"])
        assert status == 0, err
        summary = json.loads((out / "summary.json").read_text("utf-8"))
        summary["signature"] = None  # names the output directory
        written.append(summary)
        ran_in.append(int(where.read_text()))
    assert written[0] == written[1]
    assert written[0]["gap"] and written[0]["rejections"]  # the aside's sections
    assert ran_in[0] == os.getpid() and ran_in[1] != os.getpid()
