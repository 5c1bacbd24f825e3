"""Per-request statistics of classified rows as one SQL query, run by DuckDB on one
machine or by Spark SQL on a cluster (the optional ``distributed`` extra).

Every interval of the analysis resamples whole prompt pairs, so what a figure needs of
a request is a handful of counts: its events, accepted drafts, steps, judged rows (those
whose token has classes; ``reached``: every row the target judged) and the text they
emitted, per class of one column (:data:`BY`). :data:`QUERY` computes
them from ``tokens.parquet`` rows (``tokenlens analyze`` writes them; a directory of
such files, partitioned or not, is read as one table), grouped by run, request and
class: a table orders of magnitude smaller than the rows, and the same text for both
engines (plain SQL: CAST, CASE, SUM, GROUP BY; NULLS LAST spelt out, since the two
order NULLs apart by default). docs/analysis.md says how to point it at a cluster.

Sums are integer counts only, so both engines give the same table to the last digit
whatever order their workers add rows in.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from tokenlens.analysis.decompose import bins_of
from tokenlens.analysis.request_bins import CONF_ROW, Runner, confidence_edges
from tokenlens.arrays import F64
from tokenlens.errors import TokenlensError

BY = (
    "script",
    "pos",
    "boundary",
    "particle_type",
    "rank_bucket",
    "bytes_bucket",
    "conf_bucket",
    "n_bytes",
    "position",
    "confidence",
)
"""The class columns a query may split requests by (one per query); ``n_bytes``, the
token's UTF-8 byte length, gives ``request-figures`` the length-standardised gap,
``position``, the draft position, its acceptance by position, and ``confidence`` (not a
column: the analysis' bin of the target's confidence, :data:`CONFIDENCE`) the split by
confidence, the H2 contrast and the verdicts."""

CONFIDENCE = "confidence"
"""The class of a judged row's ``top1_prob`` among the analysis' confidence bins
(:func:`~tokenlens.analysis.decompose.confidence_bins`: quantiles of every judged row's
finite ``top1_prob``), its 0-based index; the table's ``class_edges`` holds the bins'
edges. Two grouped queries find them first (:mod:`~tokenlens.analysis.request_bins`);
each k's own edges too, for the per-k verdicts (``class_k``, ``class_k_edges``)."""

ENGINES = ("duckdb", "spark")

ALL = "all"
"""``--by all``: every class column of :data:`BY`, one table each (:func:`request_stats_all`)."""

KEYS = ("run", "method", "k", "family", "request_id", "prompt_id", "lang", "pair")
"""What a row of the table is counted per, besides its class."""

QUERY = """
SELECT
  {keys},
  {by} AS class,
  '{name}' AS class_column,
  COUNT(*) AS events,
  CAST(SUM(CASE WHEN accepted THEN 1 ELSE 0 END) AS BIGINT) AS accepted,
  CAST(SUM(CASE WHEN position = 0 THEN 1 ELSE 0 END) AS BIGINT) AS steps,
  CAST(SUM(CASE WHEN accepted THEN COALESCE(n_chars, 0) ELSE 0 END) AS BIGINT)
    AS accepted_chars,
  CAST(SUM(CASE WHEN accepted THEN COALESCE(n_bytes, 0) ELSE 0 END) AS BIGINT)
    AS accepted_bytes,
  CAST(SUM(CASE WHEN judged AND script IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT) AS judged,
  CAST(SUM(CASE WHEN judged AND script IS NOT NULL AND accepted THEN 1 ELSE 0 END)
    AS BIGINT) AS judged_accepted,
  CAST(SUM(CASE WHEN judged AND script IS NOT NULL THEN n_chars ELSE 0 END) AS BIGINT)
    AS judged_chars,
  CAST(SUM(CASE WHEN judged AND script IS NOT NULL THEN n_bytes ELSE 0 END) AS BIGINT)
    AS judged_bytes,
  CAST(SUM(CASE WHEN judged THEN 1 ELSE 0 END) AS BIGINT) AS reached,
  {edges} AS class_edges{more}
FROM tokens
GROUP BY {keys}, {by}{group_more}
ORDER BY run, request_id, class NULLS LAST
"""
"""The aggregation, with ``{by}`` one of :data:`BY` (or the expression of
:data:`CONFIDENCE`); reads a table or view ``tokens``."""


@dataclass(frozen=True)
class StatsConfig:
    """``source``: a tokens.parquet file or a directory of them (read recursively; each
    file holds every column, directory names are not read as partition columns);
    ``out``: the Parquet output (a file with DuckDB, a directory of parts with Spark);
    ``master``: Spark's master URL (``local[2]``, ``spark://host:7077``, ``yarn``...);
    ``memory``: DuckDB's memory limit (``"1GB"``; None: DuckDB's own, 80% of the
    machine's memory), beyond which it spills to a temporary directory."""

    source: str
    out: str
    engine: str = "duckdb"
    by: str = "script"
    master: str = "local[2]"
    memory: str | None = None


def query(
    by: str = "script",
    edges: F64 | None = None,
    per_k: Mapping[int, F64 | None] | None = None,
) -> str:
    """:data:`QUERY` for class column ``by`` (refused unless one of :data:`BY`).
    :data:`CONFIDENCE` counts by the bins of ``edges`` (None: no row has a bin) and,
    with ``per_k`` (each k's own edges, over its rows alone: the analysis' per-k
    sensitivity), also by ``class_k``, the bin among the edges of the row's k, which
    ``class_k_edges`` records."""
    if by not in BY:
        raise TokenlensError(f"--by must be one of {', '.join(BY)} (got {by!r})")
    keys = ", ".join(KEYS)
    if by != CONFIDENCE:
        return QUERY.format(keys=keys, by=by, name=by, edges=NO_EDGES, more="", group_more="")
    expression, text = _binned(edges)
    more = group_more = ""
    if per_k:
        by_k = {k: _binned(e) for k, e in sorted(per_k.items())}
        bin_k = "CASE k " + " ".join(f"WHEN {k} THEN {b}" for k, (b, _) in by_k.items()) + " END"
        edges_k = "CASE k " + " ".join(f"WHEN {k} THEN {t}" for k, (_, t) in by_k.items()) + " END"
        more = f",\n  {bin_k} AS class_k,\n  {edges_k} AS class_k_edges"
        group_more = f", {bin_k}"
    return QUERY.format(
        keys=keys, by=expression, name=by, edges=text, more=more, group_more=group_more
    )


NO_EDGES = "CAST(NULL AS STRING)"


def _binned(edges: F64 | None) -> tuple[str, str]:
    """The SQL of a row's bin among ``edges`` and of the edges' text (the shortest
    exact ``repr`` of each)."""
    if edges is None:
        return "CAST(NULL AS INT)", NO_EDGES
    inner, _ = bins_of(edges)
    # the bin: how many inner edges lie at or below the value (np.searchsorted, "right")
    steps = [f"CASE WHEN top1_prob >= {_double(e)} THEN 1 ELSE 0 END" for e in inner]
    expression = f"CASE WHEN {CONF_ROW} THEN {' + '.join(steps) or '0'} END"
    return expression, "'" + ",".join(repr(float(e)) for e in edges) + "'"


def _double(value: float) -> str:
    """``value`` as an exact SQL double (a bare decimal literal is a DECIMAL in DuckDB)."""
    return f"CAST('{float(value)!r}' AS DOUBLE)"


KS_QUERY = "SELECT DISTINCT k FROM tokens"


def _plan(by: str) -> Callable[[Runner], str]:
    """The aggregation's text, after what it needs to know first (the bins' edges)."""

    def plan(run: Runner) -> str:
        if by != CONFIDENCE:
            return query(by)
        ks = sorted(int(k) for k in run(KS_QUERY).column("k").to_pylist())
        per_k = {k: confidence_edges(run, f"k = {k}") for k in ks}
        return query(by, confidence_edges(run), per_k)

    return plan


def request_stats(config: StatsConfig) -> pa.Table | None:
    """Run the query on ``config.engine`` and write ``config.out`` (refused if it
    exists: nothing is overwritten); return the table when it was computed on this
    machine (DuckDB, or Spark in local mode), else None (a cluster's result stays where
    its workers wrote it). ``config.by`` :data:`ALL`: see :func:`request_stats_all`."""
    if config.by == ALL:
        raise TokenlensError("--by all writes one table per class column: request_stats_all")
    _run(config, [(config.by, config.out)])
    if "://" in config.out or not config.master.startswith("local"):
        return None
    table: pa.Table = pq.read_table(config.out, partitioning=None)  # as written
    return table


def request_stats_all(config: StatsConfig) -> dict[str, int | None]:
    """One table per class column of :data:`BY`, from one engine session: ``config.out``
    becomes a directory (refused if it exists) holding ``<column>.parquet`` (DuckDB) or
    ``<column>/`` (Spark's parts), which ``request-figures`` reads as one study. Returns
    each table's rows (None where a cluster wrote it); no table is held in memory."""
    if "://" not in config.out:
        out = Path(config.out)
        if out.exists():
            raise TokenlensError(f"{out} exists: give another --out (nothing was overwritten)")
        if config.engine == "duckdb":
            out.mkdir(parents=True)
    suffix = ".parquet" if config.engine == "duckdb" else ""
    jobs = [(by, f"{config.out.rstrip('/')}/{by}{suffix}") for by in BY]
    _run(config, jobs)
    if "://" in config.out or not config.master.startswith("local"):
        return dict.fromkeys(BY)
    return {by: _rows(out) for by, out in jobs}


def _rows(path: str) -> int:
    """The rows of a Parquet file or directory of parts, from their footers."""
    files = sorted(Path(path).rglob("*.parquet")) if Path(path).is_dir() else [Path(path)]
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def _run(config: StatsConfig, jobs: list[tuple[str, str]]) -> None:
    """Each (class column, output) of ``jobs`` on ``config.engine``, in one session,
    written where it says (streamed by the engine, never held here)."""
    for by, _ in jobs:
        query(by)  # refuses an unknown column before an engine starts
    if config.engine not in ENGINES:
        raise TokenlensError(
            f"--engine must be one of {', '.join(ENGINES)} (got {config.engine!r})"
        )
    if "://" not in config.source and not Path(config.source).exists():
        raise TokenlensError(f"{config.source}: no such file or directory")
    if config.memory is not None and config.engine != "duckdb":
        raise TokenlensError(
            "--memory is DuckDB's limit; Spark takes its memory from its own settings "
            "(spark.executor.memory in spark-defaults.conf)"
        )
    for _, out in jobs:
        if "://" not in out and Path(out).exists():
            raise TokenlensError(f"{out} exists: give another --out (nothing was overwritten)")
    planned = [(_plan(by), out) for by, out in jobs]
    if config.engine == "duckdb":
        _duckdb(planned, config)
    else:
        _spark(planned, config)


def _parquet_glob(source: str) -> str:
    path = Path(source)
    return str(path / "**" / "*.parquet") if path.is_dir() else source


Job = tuple[Callable[[Runner], str], str]
"""A query's plan (:func:`_plan`) and where its table goes."""


def _duckdb(jobs: list[Job], config: StatsConfig) -> None:
    try:
        import duckdb
    except ImportError:
        raise _missing("duckdb") from None
    spill = tempfile.TemporaryDirectory(prefix="tokenlens-duckdb-")
    con = duckdb.connect()
    try:
        con.execute(f"SET temp_directory = '{_quoted(spill.name)}'")
        if config.memory is not None:
            try:
                con.execute(f"SET memory_limit = '{_quoted(config.memory)}'")
            except duckdb.Error:
                raise TokenlensError(
                    f"--memory {config.memory!r}: not a size DuckDB reads (e.g. 1GB, 500MB)"
                ) from None
        glob = _quoted(_parquet_glob(config.source))
        con.execute(
            "CREATE VIEW tokens AS SELECT * FROM read_parquet("
            f"'{glob}', union_by_name = true, hive_partitioning = false)"
        )

        def run(sql: str) -> pa.Table:
            result: pa.Table = con.sql(sql).to_arrow_table()
            return result

        for plan, out in jobs:  # streamed to the file: DuckDB spills past --memory
            con.execute(f"COPY ({plan(run)}) TO '{_quoted(out)}' (FORMAT PARQUET)")
    except duckdb.Error as exc:  # no parquet there, or not tokens.parquet's columns
        first = str(exc).strip().splitlines()[0]
        raise TokenlensError(f"{config.source}: {first}") from None
    finally:
        con.close()
        spill.cleanup()


def _quoted(text: str) -> str:
    """``text`` inside a SQL string literal."""
    return text.replace("'", "''")


def _spark(jobs: list[Job], config: StatsConfig) -> None:
    try:
        from pyspark.errors import AnalysisException
        from pyspark.sql import SparkSession
    except ImportError:
        raise _missing("pyspark") from None
    spark = (
        SparkSession.builder.master(config.master)
        .appName("tokenlens request-stats")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .getOrCreate()
    )
    try:
        rows = spark.read.option("recursiveFileLookup", "true").parquet(config.source)
        rows.createOrReplaceTempView("tokens")
        spark.sparkContext.setLogLevel("ERROR")

        def run(sql: str) -> pa.Table:
            return pa.Table.from_pandas(spark.sql(sql).toPandas(), preserve_index=False)

        for plan, out in jobs:
            try:  # Spark's default mode refuses an existing output: nothing overwritten
                spark.sql(plan(run)).write.mode("errorifexists").parquet(out)
            except AnalysisException as exc:
                first = str(exc).strip().splitlines()[0]
                raise TokenlensError(f"{out}: {first} (nothing was overwritten)") from None
    finally:
        spark.stop()


def _missing(package: str) -> TokenlensError:
    """The one-line error for an engine of the ``distributed`` extra that is absent."""
    return TokenlensError(f"{package} is not installed: pip install 'tokenlens[distributed]'")
