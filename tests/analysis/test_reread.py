"""A checked run read again at its join is the run the checks passed:
:mod:`tokenlens.analysis.reread`.

``analyze`` lets go of every run's tables after the input checks and reads each run
again just before its join, applying what the checks decided (non-finite confidences
excluded, requests another run keeps left out); a run whose files changed in between is
refused in one line and nothing is left half-written.
"""

from __future__ import annotations

import math
import os
import re
import weakref
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.support import copy_run, cut_after_first_step
from tokenlens.analysis import AnalyzeConfig, run_analyze, run_facts
from tokenlens.analysis.damage import exclude_nonfinite
from tokenlens.analysis.inputs import validate_inputs
from tokenlens.analysis.reread import reread
from tokenlens.capture.reconcile import counters_from_events
from tokenlens.errors import TokenlensError
from tokenlens.progress import SilentProgress
from tokenlens.rundir import Run, read_run


def _set(table: pa.Table, name: str, values: list[Any]) -> pa.Table:
    index = table.schema.get_field_index(name)
    field = table.schema.field(index)
    return table.set_column(index, field, pa.array(values, field.type))


def _two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of one run that share all four requests, each longer where the other
    was cut, and the first with non-finite logprobs: under ``--overlap keep-longest``
    each keeps some of the requests, and the first loses some confidences."""
    a = cut_after_first_step(copy_run(tmp_path / "a"), "demo-01-ja")
    b = cut_after_first_step(copy_run(tmp_path / "b"), "demo-01-en")
    requests = pq.read_table(a / "requests.parquet")
    own = requests.column("token_logprob").to_pylist()
    own[1][0] = math.nan  # demo-01-en, kept in a
    pq.write_table(_set(requests, "token_logprob", own), a / "requests.parquet")
    return a, b


def _expected(path: Path, kept: set[str]) -> Run:
    """What the checks decide for a run, computed here from its files alone: the
    confidences of non-finite logprobs excluded, only the ``kept`` requests and their
    events, counters from those events."""
    run, _ = exclude_nonfinite(read_run(path))
    requests = run.requests.filter(pc.is_in(run.requests["request_id"], pa.array(sorted(kept))))
    assert run.events is not None
    events = run.events.filter(pc.is_in(run.events["request_id"], pa.array(sorted(kept))))
    return replace(run, requests=requests, events=events, metrics=counters_from_events(events))


def test_a_run_read_again_is_the_checked_run(tmp_path: Path) -> None:
    a, b = _two_runs(tmp_path)
    config = AnalyzeConfig(runs=(a, b), out=tmp_path / "out", overlap="keep-longest")
    checked = validate_inputs(config)
    assert [run.path for run in checked.runs] == [a, b]
    # the checks keep no table (one run's tables at a time: analysis/run_facts.py)
    assert all(run.events is None and run.requests.num_rows == 0 for run in checked.runs)
    assert all(snap.kept is not None for snap in checked.snapshots)  # both lost requests
    assert checked.damage["nonfinite_confidence"] == [{"run": str(a), "requests": 1, "tokens": 1}]
    # each shared request stays where its output is longest, the first run on a tie
    expected = {
        a: {"demo-01-en", "short-ja", "short-en"},  # b's demo-01-en was cut
        b: {"demo-01-ja"},  # a's demo-01-ja was cut
    }
    for run, snap in zip(checked.runs, checked.snapshots, strict=True):
        again = reread(run, snap)
        want = _expected(run.path, expected[run.path])
        assert again.requests.equals(want.requests)
        assert again.events is not None and want.events is not None
        assert again.events.equals(want.events)
        assert again.metrics == want.metrics == run.metrics
        assert again.manifest == want.manifest == run.manifest


def _edit_text(run: Path) -> Path:
    """``run`` with its first request's text edited (its ids no longer decode to it)."""
    requests = pq.read_table(run / "requests.parquet")
    texts = requests.column("output_text").to_pylist()
    texts[0] = texts[0] + " edited"
    pq.write_table(_set(requests, "output_text", texts), run / "requests.parquet")
    return run


def test_a_study_with_two_faults_is_refused_for_the_first_in_the_checks_order(
    tmp_path: Path,
) -> None:
    """The first run's ids do not decode to its text; the second is a copy of the
    first. Each run's own checks run as it is read, but a comparison of runs comes
    before the tokens in the checks' order: the copy is what is refused."""
    a = _edit_text(copy_run(tmp_path / "a"))
    b = copy_run(tmp_path / "b")
    pq.write_table(pq.read_table(a / "requests.parquet"), b / "requests.parquet")
    config = AnalyzeConfig(runs=(a, b), out=tmp_path / "out")
    with pytest.raises(TokenlensError, match="hold the same requests and events"):
        validate_inputs(config)
    # alone, the first run is refused for its text
    with pytest.raises(TokenlensError, match="do not decode to output_text"):
        validate_inputs(AnalyzeConfig(runs=(a,), out=tmp_path / "out2"))


@pytest.mark.parametrize(
    ("edited", "refusal"),
    [(False, "hold the same requests and events"), (True, "do not decode to output_text")],
    ids=["three-copies", "the-first-refused-for-its-text"],
)
def test_the_checks_hold_one_run_s_tables_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edited: bool, refusal: str
) -> None:
    """Every run is read once by the checks, and a run's tables are let go before the
    next run is read (weak references to each run read: none alive when the next is),
    also when a refusal of the first run is held until its turn."""
    names = ("a", "b") if edited else ("a", "b", "c")  # b and c: copies of one run
    paths = tuple(copy_run(tmp_path / name) for name in names)
    if edited:
        _edit_text(paths[0])
    alive: list[weakref.ref[pa.Table]] = []
    held_at_read: list[int] = []
    real = read_run

    def counting(path: Path) -> Run:
        held_at_read.append(sum(ref() is not None for ref in alive))
        run = real(path)
        alive.append(weakref.ref(run.requests))
        return run

    monkeypatch.setattr(run_facts, "read_run", counting)
    with pytest.raises(TokenlensError, match=refusal):
        validate_inputs(AnalyzeConfig(runs=paths, out=tmp_path / "out"))
    assert held_at_read == [0] * len(paths)


@pytest.mark.parametrize("name", ["events.parquet", "requests.parquet"])
def test_a_run_changed_after_its_checks_is_refused(tmp_path: Path, name: str) -> None:
    run = copy_run(tmp_path / "run")
    checked = validate_inputs(AnalyzeConfig(runs=(run,), out=tmp_path / "out"))
    info = (run / name).stat()
    os.utime(run / name, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000))
    with pytest.raises(TokenlensError, match=re.escape(f"{name} changed while analyze read it")):
        reread(checked.runs[0], checked.snapshots[0])


def test_analyze_refuses_a_run_rewritten_between_its_checks_and_its_join(
    tmp_path: Path,
) -> None:
    """The events rewritten (the same rows) after the input checks, before the join:
    one line, and no tokens.parquet or summary.json left behind."""
    run = copy_run(tmp_path / "run")
    events = pq.read_table(run / "events.parquet")

    class Rewrite(SilentProgress):
        def stage(self, name: str, total: float | None = None, unit: str = "it") -> None:
            if unit == "run":  # the joins begin: the checks are done
                pq.write_table(events.slice(0), run / "events.parquet")
                info = (run / "events.parquet").stat()
                os.utime(run / "events.parquet", ns=(info.st_atime_ns, info.st_mtime_ns + 1))

    out = tmp_path / "out"
    config = AnalyzeConfig(runs=(run,), out=out, n_boot=10, regression=False)
    with pytest.raises(
        TokenlensError, match=re.escape("events.parquet changed while analyze read it")
    ):
        run_analyze(config, progress=Rewrite())
    assert not (out / "summary.json").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(("tokens", "outputs"))]
