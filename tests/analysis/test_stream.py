"""``analyze`` in chunks of whole requests gives the numbers of one join of each run.

The chunked join (:mod:`tokenlens.analysis.stream`) must give the very frame one join
of the run gives (values, dtypes, category order, row order), and ``analyze`` run in
chunks of a few dozen events must write the committed demo's summary.json and
tables.md (the committed sample was written by the whole-run join) to the last digit.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.support import REPO
from tokenlens.analysis import AnalyzeConfig, run_analyze
from tokenlens.analysis import stream as stream_module
from tokenlens.analysis.chunks import chunk_bounds, cut
from tokenlens.analysis.columns import labels
from tokenlens.analysis.join import join_run, run_vocabulary
from tokenlens.analysis.stream import (
    UNREAD,
    assemble,
    compact,
    concat_runs,
    join_parts,
)
from tokenlens.demo import domain_file
from tokenlens.demo.sizes import ALL_CORPORA, SIZES
from tokenlens.errors import TokenlensError
from tokenlens.packaged import corpora_dir
from tokenlens.report import write_tables
from tokenlens.rundir import Run, read_run
from tokenlens.text import Vocabulary

DEMO = REPO / "reports" / "demo"
RUNS = tuple(sorted(p for p in (DEMO / "runs").iterdir() if p.is_dir()))


def join_chunked(run: Run, label: str, vocab: Vocabulary, **kwargs: Any) -> pd.DataFrame:
    """One run's frame as analyze builds it: joined in chunks, then assembled."""
    return assemble([join_parts(run, label, vocab, **kwargs)])


def locked_numerics() -> bool:
    """numpy and pandas at the versions the committed sample was written with."""
    import importlib.metadata as md

    lock = (REPO / "requirements" / "cpu.lock").read_text(encoding="utf-8").splitlines()
    return all(f"{name}=={md.version(name)}" in lock for name in ("numpy", "pandas"))


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_the_chunked_join_is_the_join_of_the_whole_run(path: Path) -> None:
    run = read_run(path)
    vocab = run_vocabulary(run, None)
    whole = join_run(run, "x", vocab)
    chunks = [(cut(run, b), b.rows) for b in chunk_bounds(run, 40)]
    assert len(chunks) > 3  # several chunks, or nothing is tested
    # whole requests: no request in two chunks, every event in exactly one
    seen: set[str] = set()
    for sub, _ in chunks:
        ids = set(sub.requests.column("request_id").to_pylist())
        assert not ids & seen
        seen |= ids
    rows = np.sort(np.concatenate([taken for _, taken in chunks]))
    assert np.array_equal(rows, np.arange(run.events.num_rows))  # type: ignore[union-attr]
    chunked = join_chunked(run, "x", vocab, events=40)
    pd.testing.assert_frame_equal(chunked, whole, check_exact=True)
    for name in whole.columns:
        if isinstance(whole[name].dtype, pd.CategoricalDtype):
            assert list(chunked[name].cat.categories) == list(whole[name].cat.categories), name


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.name)
def test_compacted_chunks_are_the_compacted_join_of_the_whole_run(path: Path) -> None:
    """The figures' frame, compacted chunk by chunk as analyze keeps it, equals the
    whole run's join compacted once: same values, labels, dtypes and category order."""
    run = read_run(path)
    vocab = run_vocabulary(run, None)
    whole = compact(join_run(run, "x", vocab).drop(columns=list(UNREAD)))
    chunked = compact(join_chunked(run, "x", vocab, events=40, drop=UNREAD))
    pd.testing.assert_frame_equal(chunked, whole, check_exact=True)
    assert isinstance(whole["token_text"].dtype, pd.CategoricalDtype)
    assert list(whole["token_text"].cat.categories) == sorted(whole["token_text"].cat.categories)
    assert whole["particle_type"].dtype == pd.StringDtype("pyarrow")
    # particle_type's labels (a class column) as the uncompacted frame gives them,
    # "<NA>" included; token_text is read only through value_codes, never labels
    plain = join_run(run, "x", vocab)
    assert np.array_equal(labels(chunked, "particle_type"), labels(plain, "particle_type"))
    assert (labels(chunked, "particle_type") == "<NA>").any()


@pytest.mark.parametrize("events", [40, 10**9], ids=["chunks", "whole"])
def test_the_runs_assembled_column_by_column_are_the_joined_runs_concatenated(
    events: int,
) -> None:
    """analyze's frame (every run's chunks put together one column at a time) equals
    the runs' chunked frames (each equal to the run's join, tests above) concatenated
    as analyze did before: values, dtypes, category order, row order, with several runs
    and several chunks per run (and with one chunk per run)."""
    frames, parts = [], []
    for i, path in enumerate(RUNS):
        run = read_run(path)
        vocab = run_vocabulary(run, None)
        frames.append(join_chunked(run, f"r{i}", vocab, events=events, drop=UNREAD))
        parts.append(join_parts(run, f"r{i}", vocab, events=events, drop=UNREAD))
    assert len(parts) >= 2
    if events == 40:
        assert all(len(p.chunks) > 3 for p in parts)
    expected = concat_runs(frames)
    assembled = assemble(parts)
    pd.testing.assert_frame_equal(assembled, expected, check_exact=True)
    for name in expected.columns:
        if isinstance(expected[name].dtype, pd.CategoricalDtype):
            assert list(assembled[name].cat.categories) == list(expected[name].cat.categories)
    # a class column whose categories differ between runs (pandas makes it object)
    assert (assembled.dtypes.astype(str) == "object").any()
    assert all(not p.chunks for p in parts)  # every chunk let go


def test_runs_with_other_columns_are_aligned_as_pandas_aligns_them() -> None:
    """A run whose chunks lack a column (pandas fills it in when concatenating) takes
    the frame-by-frame path: the same frame as concatenating the runs' frames."""
    parts, frames = [], []
    for i, path in enumerate(RUNS[:2]):
        run = read_run(path)
        vocab = run_vocabulary(run, None)
        part = join_parts(run, f"r{i}", vocab, events=40, drop=UNREAD)
        if i == 1:
            for chunk in part.chunks:
                del chunk["top1_prob"]
        frames.append(assemble([stream_module.RunParts([dict(c) for c in part.chunks], part.rows)]))
        parts.append(part)
    assembled = assemble(parts)
    pd.testing.assert_frame_equal(assembled, concat_runs(frames), check_exact=True)
    assert assembled["top1_prob"].iloc[len(frames[0]) :].isna().all()
    assert assembled["top1_prob"].iloc[: len(frames[0])].notna().any()


def without_paths(value: Any) -> Any:
    """summary.json minus the run paths (the committed one was written from the repo)."""
    if isinstance(value, dict):
        return {k: without_paths(v) for k, v in value.items() if k != "path"}
    if isinstance(value, list):
        return [without_paths(v) for v in value]
    return value


def close_floats(a: Any, b: Any, rel: float = 1e-9) -> bool:
    """``a == b``, floats within ``rel`` of each other (the logistic model's fit goes
    through BLAS, whose kernels differ by CPU: its last digits differ between machines)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close_floats(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close_floats(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= rel * max(abs(a), abs(b))
    return bool(a == b)


def test_close_floats_tells_a_last_digit_from_a_difference() -> None:
    assert close_floats({"x": [0.7016069949196816]}, {"x": [0.7016069949196735]})
    assert not close_floats({"x": [0.70160699]}, {"x": [0.70160700]})
    assert not close_floats({"x": 1.0}, {"y": 1.0}) and not close_floats([1.0], [1.0, 2.0])


def test_analyze_in_small_chunks_writes_the_committed_demo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """analyze in chunks of 30 events joined by two forked workers (and its gap and
    rejection sections computed in a forked process) writes, digit for digit, what one
    process joining the default chunks writes on the same machine; and that is the
    committed demo (to the last digit where the locked numpy and pandas run on the CPU
    the sample was made on; elsewhere the logistic model's BLAS may differ in the last
    bits)."""
    if not locked_numerics():
        pytest.skip("numpy/pandas are not the locked versions the sample was written with")
    corpus = SIZES["medium"].corpus  # the demo sample's size, as demo --reanalyze reads it
    prompts = None if corpus == ALL_CORPORA else corpora_dir() / f"{corpus}.jsonl"
    config = AnalyzeConfig(
        runs=RUNS,
        out=tmp_path / "serial",
        bench=DEMO / "bench",
        prompts=domain_file(prompts, list(RUNS)),
        jobs=1,
    )
    run_analyze(config)
    out = tmp_path / "analysis"
    monkeypatch.setattr(stream_module, "CHUNK_EVENTS", 30)
    summarize_module = importlib.import_module("tokenlens.analysis.summarize")
    monkeypatch.setattr(summarize_module, "ASIDE_MIN_ROWS", 0)  # the gap section aside
    run_analyze(replace(config, out=out, jobs=2))  # the chunks joined in two workers
    serial = json.loads((tmp_path / "serial" / "summary.json").read_text("utf-8"))
    written = json.loads((out / "summary.json").read_text("utf-8"))
    assert without_paths(written) == without_paths(serial)
    committed = json.loads((DEMO / "analysis" / "summary.json").read_text("utf-8"))
    assert close_floats(without_paths(written), without_paths(committed))
    assert write_tables(out).read_bytes() == (DEMO / "analysis" / "tables.md").read_bytes()
    # tokens.parquet: every event once, written chunk by chunk (no partial file left)
    tokens = pq.read_table(out / "tokens.parquet").to_pandas()
    assert not list(out.glob("*.partial"))
    events = sum(read_run(p).events.num_rows for p in RUNS)  # type: ignore[union-attr]
    keys = ["run", "request_id", "step", "position"]
    assert len(tokens) == events and not tokens.duplicated(keys).any()
    # the same rows as the serial analysis wrote (the chunks' order aside), both files
    for name in ("tokens.parquet", "outputs.parquet"):
        made = pq.read_table(out / name).to_pandas()
        one = pq.read_table(tmp_path / "serial" / name).to_pandas()
        by = [c for c in ("run", "request_id", "step", "position", "output_index") if c in one]
        made, one = (f.sort_values(by, ignore_index=True) for f in (made, one))
        pd.testing.assert_frame_equal(made, one, check_exact=True)


def _resident_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as status:
        line = next(x for x in status if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_freed_chunks_leave_the_resident_set() -> None:
    """Arrays the size of a chunk's column, below the mmap threshold that bound_heap
    fixes, come from the C heap; freed between arrays still alive, they stay resident
    until give_back_memory returns their pages."""
    from tokenlens.analysis import memory
    from tokenlens.analysis.memory import MMAP_THRESHOLD, bound_heap, give_back_memory

    if memory._libc() is None:
        pytest.skip("not glibc")
    bound_heap()
    size = MMAP_THRESHOLD // 2
    arrays = [np.ones(size // 8) for _ in range(600)]  # ~300 MiB, every page touched
    kept = arrays[::50]  # alive between the freed ones: the heap cannot shrink from its top
    del arrays
    before = _resident_mib()
    give_back_memory()
    after = _resident_mib()
    assert before - after > 200, (before, after)
    assert all(float(a.sum()) == size // 8 for a in kept)


def test_spilled_parts_come_back_as_they_were(tmp_path: Path) -> None:
    """A run's joined parts written to disk while later runs are joined
    (``stream.spill``) come back value for value, dtype for dtype and category for
    category, and the file is gone once read."""
    from tokenlens.analysis.stream import spill, unspill

    run = read_run(DEMO / "runs" / "draft_model-k3")
    vocab = run_vocabulary(run, None)
    parts = join_parts(run, "dm", vocab, events=40, drop=UNREAD)
    kept = [{name: series.copy() for name, series in chunk.items()} for chunk in parts.chunks]
    rows = parts.rows.copy()
    path = spill(parts, tmp_path / "0.pickle")
    assert not parts.chunks  # let go
    back = unspill(path)
    assert not path.exists()
    assert np.array_equal(back.rows, rows)
    assert len(back.chunks) == len(kept) > 1
    for got, want in zip(back.chunks, kept, strict=True):
        assert list(got) == list(want)
        for name in want:
            pd.testing.assert_series_equal(got[name], want[name], check_exact=True)


def test_compact_narrows_integer_columns_only_where_every_value_fits() -> None:
    from tokenlens.analysis.stream import NARROW

    frame = pd.DataFrame(
        {
            "k": np.array([3, 3], dtype=np.int64),
            "position": np.array([0, 2**15], dtype=np.int64),  # one value out of int16
            "n_bytes": pd.array([4, None], dtype="Int64"),
            "draft_target_rank": pd.array([None, None], dtype="Int64"),
            "top1_prob": [0.5, 0.25],
        }
    )
    before = frame.copy()
    out = compact(frame)
    assert out["k"].dtype == NARROW["k"] == "int16"
    assert out["position"].dtype == np.int64  # kept: 2**15 does not fit
    assert str(out["n_bytes"].dtype) == "Int32" and out["n_bytes"].isna().tolist() == [False, True]
    assert str(out["draft_target_rank"].dtype) == "Int32"
    assert out["top1_prob"].dtype == np.float64
    for name in before:
        assert out[name].astype("float64").equals(before[name].astype("float64"))


def test_a_full_disk_while_spilling_is_one_line_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(stream_module.pickle, "dump", full)
    out = tmp_path / "out"
    config = AnalyzeConfig(runs=RUNS[:2], out=out, n_boot=10, regression=False, jobs=1)
    with pytest.raises(TokenlensError, match="No space left on device") as caught:
        run_analyze(config)
    assert "\n" not in str(caught.value) and "cannot hold a joined run's columns" in str(
        caught.value
    )
    assert sorted(p.name for p in out.iterdir()) == [".tokenlens-analyze.json"]
