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

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

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
)
"""The class columns a query may split requests by (one per query); ``n_bytes``, the
token's UTF-8 byte length, gives ``request-figures`` the length-standardised gap, and
``position``, the draft position, its acceptance by position."""

ENGINES = ("duckdb", "spark")

KEYS = ("run", "method", "k", "family", "request_id", "prompt_id", "lang", "pair")
"""What a row of the table is counted per, besides its class."""

QUERY = """
SELECT
  {keys},
  {by} AS class,
  '{by}' AS class_column,
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
  CAST(SUM(CASE WHEN judged THEN 1 ELSE 0 END) AS BIGINT) AS reached
FROM tokens
GROUP BY {keys}, {by}
ORDER BY run, request_id, class NULLS LAST
"""
"""The aggregation, with ``{by}`` one of :data:`BY`; reads a table or view ``tokens``."""


@dataclass(frozen=True)
class StatsConfig:
    """``source``: a tokens.parquet file or a directory of them (read recursively; each
    file holds every column, directory names are not read as partition columns);
    ``out``: the Parquet output (a file with DuckDB, a directory of parts with Spark);
    ``master``: Spark's master URL (``local[2]``, ``spark://host:7077``, ``yarn``...)."""

    source: str
    out: str
    engine: str = "duckdb"
    by: str = "script"
    master: str = "local[2]"


def query(by: str = "script") -> str:
    """:data:`QUERY` for class column ``by`` (refused unless one of :data:`BY`)."""
    if by not in BY:
        raise TokenlensError(f"--by must be one of {', '.join(BY)} (got {by!r})")
    return QUERY.format(keys=", ".join(KEYS), by=by)


def request_stats(config: StatsConfig) -> pa.Table | None:
    """Run the query on ``config.engine`` and write ``config.out``; return the table
    when it was computed on this machine (DuckDB, or Spark in local mode), else None
    (a cluster's result stays where its workers wrote it)."""
    sql = query(config.by)
    if config.engine not in ENGINES:
        raise TokenlensError(
            f"--engine must be one of {', '.join(ENGINES)} (got {config.engine!r})"
        )
    if "://" not in config.source and not Path(config.source).exists():
        raise TokenlensError(f"{config.source}: no such file or directory")
    if config.engine == "duckdb":
        return _duckdb(sql, config)
    return _spark(sql, config)


def _parquet_glob(source: str) -> str:
    path = Path(source)
    return str(path / "**" / "*.parquet") if path.is_dir() else source


def _duckdb(sql: str, config: StatsConfig) -> pa.Table:
    try:
        import duckdb
    except ImportError:
        raise _missing("duckdb") from None
    con = duckdb.connect()
    try:
        glob = _parquet_glob(config.source).replace("'", "''")
        con.execute(
            "CREATE VIEW tokens AS SELECT * FROM read_parquet("
            f"'{glob}', union_by_name = true, hive_partitioning = false)"
        )
        table: pa.Table = con.sql(sql).to_arrow_table()
    except duckdb.Error as exc:  # no parquet there, or not tokens.parquet's columns
        first = str(exc).strip().splitlines()[0]
        raise TokenlensError(f"{config.source}: {first}") from None
    finally:
        con.close()
    import pyarrow.parquet as pq

    pq.write_table(table, config.out)
    return table


def _spark(sql: str, config: StatsConfig) -> pa.Table | None:
    try:
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
        result = spark.sql(sql).cache()
        result.write.mode("overwrite").parquet(config.out)
        if not config.master.startswith("local"):
            return None
        return pa.Table.from_pandas(result.toPandas(), preserve_index=False)
    finally:
        spark.stop()


def _missing(package: str) -> TokenlensError:
    """The one-line error for an engine of the ``distributed`` extra that is absent."""
    return TokenlensError(f"{package} is not installed: pip install 'tokenlens[distributed]'")
