"""The per-request aggregation (:mod:`tokenlens.analysis.request_stats`): one SQL query,
the same table from DuckDB and from Spark in local mode, equal to the counts taken
row by row from the single-machine analysis' tokens.parquet.

The Spark test starts a JVM (about 10 s on a quiet 2-core machine, 30 s on a busy
one): it is marked ``spark`` (``-m "not spark"`` leaves it out).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.support import REPO, assert_one_line_error, cli
from tokenlens.analysis import AnalyzeConfig, run_analyze
from tokenlens.analysis.breakdown import row_mask
from tokenlens.analysis.decompose import CONF_BINS, bins_of, confidence_bins
from tokenlens.analysis.request_stats import (
    ALL,
    BY,
    CONFIDENCE,
    KEYS,
    StatsConfig,
    query,
    request_stats,
    request_stats_all,
)
from tokenlens.errors import TokenlensError

RUNS = tuple(sorted(p for p in (REPO / "reports" / "demo" / "runs").iterdir() if p.is_dir()))
COUNTS = (
    "events",
    "accepted",
    "steps",
    "judged",
    "judged_accepted",
    "judged_chars",
    "accepted_chars",
    "accepted_bytes",
    "reached",
)


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's tokens.parquet, split by run into a directory of files (as a fleet's
    analyses, one per shard of traces, would leave them)."""
    root = tmp_path_factory.mktemp("stats")
    run_analyze(AnalyzeConfig(runs=RUNS, out=root / "analysis", n_boot=20, regression=False))
    tokens = pq.read_table(root / "analysis" / "tokens.parquet")
    shards = root / "tokens"
    for i, run in enumerate(pc.unique(tokens.column("run")).to_pylist()):
        (shards / f"run={i}").mkdir(parents=True)
        mine = tokens.filter(pc.equal(tokens.column("run"), run))
        pq.write_table(mine, shards / f"run={i}" / "part-0.parquet")
    return shards


def rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """The table's rows, sorted (None sorts first), in the query's column order."""
    names = [*KEYS, "class", *COUNTS]
    records = [tuple(r[n] for n in names) for r in table.select(names).to_pylist()]
    return sorted(records, key=lambda r: tuple((v is not None, v) for v in r))


def counted_by_hand(shards: Path, by: str = "script") -> list[tuple[Any, ...]]:
    """The same counts, row by row from the parquet files, without SQL."""
    files = sorted(shards.rglob("*.parquet"))
    frame = pa.concat_tables([pq.read_table(f, partitioning=None) for f in files]).to_pandas()
    judged = frame["judged"].to_numpy(bool) & frame["script"].notna().to_numpy()
    accepted = frame["accepted"].to_numpy(bool)
    frame = frame.assign(
        events=1,
        accepted_n=accepted.astype(int),
        steps=(frame["position"] == 0).astype(int),
        judged_n=judged.astype(int),
        judged_accepted=(judged & accepted).astype(int),
        judged_chars=np.where(judged, frame["n_chars"].fillna(0).to_numpy(int), 0),
        accepted_chars=np.where(accepted, frame["n_chars"].fillna(0).to_numpy(int), 0),
        accepted_bytes=np.where(accepted, frame["n_bytes"].fillna(0).to_numpy(int), 0),
        reached=frame["judged"].to_numpy(bool).astype(int),
    )
    if by == CONFIDENCE:  # the analysis' own bins, over the same rows
        judged_rows = row_mask(frame, "judged")
        top1 = frame["top1_prob"].to_numpy(dtype=np.float64)
        codes, _ = confidence_bins(frame, judged_rows & np.isfinite(top1))
        frame["class"] = [None if c < 0 else int(c) for c in codes]
    else:
        frame["class"] = frame[by]
    grouped = frame.groupby([*KEYS, "class"], dropna=False, sort=False)
    sums = grouped[["events", "accepted_n", "steps", "judged_n", "judged_accepted"]].sum()
    for name in ("judged_chars", "accepted_chars", "accepted_bytes", "reached"):
        sums[name] = grouped[name].sum()
    out = []
    for key, row in sums.iterrows():
        key = tuple(None if isinstance(v, float) and np.isnan(v) else v for v in key)
        out.append((*key, *(int(row[c]) for c in sums.columns)))
    return sorted(out, key=lambda r: tuple((v is not None, v) for v in r))


@pytest.mark.parametrize("by", ["script", "n_bytes", "position", CONFIDENCE])
def test_duckdb_gives_the_counts_of_the_rows(shards: Path, tmp_path: Path, by: str) -> None:
    pytest.importorskip("duckdb")
    table = request_stats(StatsConfig(str(shards), str(tmp_path / "stats.parquet"), by=by))
    assert table is not None and table.num_rows > 0
    assert rows(table) == counted_by_hand(shards, by)
    assert rows(pq.read_table(tmp_path / "stats.parquet", partitioning=None)) == rows(table)
    # per request x class: several classes per request, never a request in two runs
    assert table.num_rows > len(set(table.column("request_id").to_pylist()))


@pytest.mark.spark
@pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs a Java runtime (17+)")
def test_spark_runs_the_same_query_and_gives_the_same_table(shards: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    pytest.importorskip("duckdb")
    # every class column, from one session each (--by all)
    out = tmp_path / "spark"
    sparks = request_stats_all(StatsConfig(str(shards), str(out), engine="spark", by=ALL))
    locals_ = request_stats_all(StatsConfig(str(shards), str(tmp_path / "duck"), by=ALL))
    assert list(sparks) == list(locals_) == list(BY)
    assert sparks == locals_ and all(n for n in sparks.values())  # rows of each table
    for by in BY:
        spark = pq.read_table(out / by, partitioning=None)
        local = pq.read_table(tmp_path / "duck" / f"{by}.parquet")
        assert rows(spark) == rows(local), by
        edges = set(spark.column("class_edges").to_pylist())
        assert edges == set(local.column("class_edges").to_pylist()), by
        assert list((out / by).glob("part-*.parquet"))  # what a cluster's workers leave
    status, _, err = cli(["request-stats", str(shards), "--engine", "spark", "--out", str(out)])
    assert_one_line_error(status, err, "nothing was overwritten")


def test_confidence_bins_are_the_analysis_bins(shards: Path, tmp_path: Path) -> None:
    """``--by confidence``: the edges the table records give the very labels of the
    analysis' bins (found by a count and the ranks' values, then numpy's arithmetic)."""
    pytest.importorskip("duckdb")
    table = request_stats(StatsConfig(str(shards), str(tmp_path / "c.parquet"), by=CONFIDENCE))
    assert table is not None
    edges = set(table.column("class_edges").to_pylist())
    assert len(edges) == 1
    frame = pa.concat_tables(
        [pq.read_table(f, partitioning=None) for f in sorted(shards.rglob("*.parquet"))]
    ).to_pandas()
    top1 = frame["top1_prob"].to_numpy(dtype=np.float64)
    _, labels = confidence_bins(frame, row_mask(frame, "judged") & np.isfinite(top1))
    got = bins_of(np.array([float(e) for e in edges.pop().split(",")]))[1]
    assert got == labels and len(labels) == CONF_BINS


def test_nothing_is_overwritten(shards: Path, tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    out = tmp_path / "mine.parquet"
    out.write_bytes(b"the user's file")
    status, _, err = cli(["request-stats", str(shards), "--out", str(out)])
    assert_one_line_error(status, err, "exists")
    status, _, err = cli(["request-stats", str(shards), "--by", "all", "--out", str(tmp_path)])
    assert_one_line_error(status, err, "exists")
    assert out.read_bytes() == b"the user's file"


def test_a_memory_limit_gives_the_same_table(shards: Path, tmp_path: Path) -> None:
    """DuckDB under a small memory limit (it spills the sort of the confidence ranks)
    counts the same; a size it cannot read, or a limit for Spark, is one line."""
    pytest.importorskip("duckdb")
    free = request_stats(StatsConfig(str(shards), str(tmp_path / "a.parquet"), by=CONFIDENCE))
    small = StatsConfig(str(shards), str(tmp_path / "b.parquet"), by=CONFIDENCE, memory="20MB")
    limited = request_stats(small)
    assert free is not None and limited is not None and free.equals(limited)
    out = str(tmp_path / "c.parquet")
    status, _, err = cli(["request-stats", str(shards), "--out", out, "--memory", "lots"])
    assert_one_line_error(status, err, "not a size DuckDB reads")
    status, _, err = cli(
        ["request-stats", str(shards), "--out", out, "--memory", "1GB", "--engine", "spark"]
    )
    assert_one_line_error(status, err, "--memory is DuckDB's limit")


def test_only_the_listed_classes_and_engines() -> None:
    assert "GROUP BY run" in query("pos")
    with pytest.raises(TokenlensError, match="--by must be one of"):
        query("token_text; DROP TABLE x")
    with pytest.raises(TokenlensError, match="--engine must be one of"):
        request_stats(StatsConfig("x", "y", engine="ray"))


def test_the_command_writes_the_table_and_refuses_in_one_line(shards: Path, tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    out = tmp_path / "by-pos.parquet"
    status, stdout, err = cli(["request-stats", str(shards), "--by", "pos", "--out", str(out)])
    assert status == 0, err
    assert str(out) in stdout
    table = pq.read_table(out, partitioning=None)
    assert "名詞" in set(table.column("class").to_pylist())  # split by part of speech
    status, _, err = cli(["request-stats", str(tmp_path / "none"), "--out", str(out)])
    assert_one_line_error(status, err, "no such file or directory")
