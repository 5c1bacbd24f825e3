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

--by picks the class column one table counts by; `tokenlens request-figures` reads
the table and gives, whatever the column, the rates, text per step and gaps per
drafter family and per run, and by the column: a token-class breakdown (script, pos,
boundary, particle_type, rank_bucket, bytes_bucket, conf_bucket), the gap with token
byte length standardised away (n_bytes), or the rates by draft position (position).
"""

EPILOG = """\
examples:
  tokenlens request-stats out/dm3/tokens.parquet --out out/dm3/requests.parquet
  tokenlens request-stats out/fleet/ --by pos --out out/fleet-pos.parquet
  tokenlens request-stats out/fleet/ --by n_bytes --out out/fleet-length.parquet
  tokenlens request-stats s3a://traces/tokens/ --engine spark \\
      --master spark://head:7077 --out s3a://traces/request-stats/
"""


def register(subparsers: Any) -> None:
    """Add the ``request-stats`` subcommand to the root parser's subparsers."""
    from tokenlens.analysis.request_stats import BY, ENGINES

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
        "--by", choices=BY, default="script", help="class column (default: %(default)s)"
    )
    parser.add_argument(
        "--master", default="local[2]", metavar="URL", help="Spark master (default: %(default)s)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the query; print where the table went."""
    from tokenlens.analysis.request_stats import StatsConfig, request_stats

    config = StatsConfig(args.source, args.out, args.engine, args.by, args.master)
    table = request_stats(config)
    rows = f"{table.num_rows} rows" if table is not None else "written by the cluster"
    say(f"{args.out} ({rows})")
    return 0
