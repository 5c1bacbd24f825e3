"""``tokenlens request-stats``: per-request counts of analysed rows, on DuckDB or Spark."""

from __future__ import annotations

import argparse
from typing import Any

from tokenlens.cli.common import say

DESCRIPTION = """\
Count, per run, request and class, what the analysis' figures are sums of (events,
accepted drafts, steps, judged rows, their accepted drafts, characters and bytes), with
one SQL query over tokens.parquet rows (what `tokenlens analyze` writes; a directory of
such files, e.g. one analysis per shard of a fleet's traces, is read as one table).

--engine duckdb runs it on this machine; --engine spark runs the same query on Spark
SQL, in local mode (--master local[N]) or on a cluster (--master spark://HOST:7077,
yarn, k8s://...; SOURCE and --out then name storage every worker reads, e.g. s3a:// or
hdfs://). Needs the optional extra: pip install 'tokenlens[distributed]'.

--by picks the class column one table counts by (--by all: every one, a table each,
in the directory --out, which request-figures reads whole). `tokenlens
request-figures` reads the table and gives, whatever the column, the rates, text per
step and gaps per drafter family and per run, and by the column: a token-class
breakdown (script, pos, boundary, particle_type, rank_bucket, bytes_bucket,
conf_bucket), the gap with token byte length standardised away (n_bytes), the rates by
draft position and the speed model per run (position), or the split by the target's
confidence, the H2 contrast and the H1/H2 verdicts (confidence: the analysis' bins,
found by the engine first).
"""

EPILOG = """\
examples:
  tokenlens request-stats out/dm3/tokens.parquet --out out/dm3/requests.parquet
  tokenlens request-stats out/fleet/ --by pos --out out/fleet-pos.parquet
  tokenlens request-stats out/fleet/ --by n_bytes --out out/fleet-length.parquet
  tokenlens request-stats out/fleet/ --by all --memory 1GB --out out/fleet-counts
  tokenlens request-stats s3a://traces/tokens/ --engine spark \\
      --master spark://head:7077 --out s3a://traces/request-stats/
"""


def register(subparsers: Any) -> None:
    """Add the ``request-stats`` subcommand to the root parser's subparsers."""
    from tokenlens.analysis.request_stats import ALL, BY, ENGINES

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "request-stats",
        help="per-request counts of analysed rows, by DuckDB or Spark (one SQL query)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("source", metavar="SOURCE", help="tokens.parquet, or a directory of them")
    parser.add_argument("--out", required=True, metavar="PATH", help="Parquet output")
    parser.add_argument("--engine", choices=ENGINES, default="duckdb")
    parser.add_argument(
        "--by",
        choices=(*BY, ALL),
        default="script",
        help="class column, or all: one table per class column in the directory --out "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--master", default="local[2]", metavar="URL", help="Spark master (default: %(default)s)"
    )
    parser.add_argument(
        "--memory",
        metavar="SIZE",
        help="DuckDB's memory limit, e.g. 1GB: beyond it, it spills to a temporary "
        "directory (default: DuckDB's own, 80%% of the machine's memory; Spark: its "
        "executor settings)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the query; print where the table went."""
    from tokenlens.analysis.request_stats import ALL, StatsConfig, request_stats, request_stats_all

    config = StatsConfig(args.source, args.out, args.engine, args.by, args.master, args.memory)
    if args.by == ALL:
        written = request_stats_all(config)
        counted = ", ".join(
            f"{by} {n} rows" if n is not None else f"{by} written by the cluster"
            for by, n in written.items()
        )
        say(f"{args.out}: a table per class column ({counted})")
        return 0
    say(f"{args.out} ({_rows(request_stats(config))})")
    return 0


def _rows(table: Any) -> str:
    return f"{table.num_rows} rows" if table is not None else "written by the cluster"
