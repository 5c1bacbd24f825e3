"""``tokenlens request-figures``: acceptance and one class breakdown from per-request counts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tokenlens.cli.common import add_bootstrap_options, add_interval_option, say

DESCRIPTION = """\
Read the table `tokenlens request-stats` wrote (a Parquet file, or Spark's directory
of parts, copied to this machine) and compute, per drafter family, the figures that are
sums of its counts: acceptance per language (vLLM's rate: accepted / all drafts), the
judged-rows rate, accepted tokens, characters and bytes per verification step, and the
table's class breakdown (by_script, by_pos, by_byte_length..., judged rows only), each
with the prompt-clustered bootstrap interval of `tokenlens analyze`. With analyze's
--seed, --bootstrap, --min-count and --interval, the figures equal those of
summary.json for the same runs, to the last digit (the scope family's at its top level,
e.g. acceptance, text_per_step and by_script; every family's under families and
byte_length): a fleet's traces are counted where they lie and read here, in the memory
of the table, not of its events.
"""

EPILOG = """\
examples:
  tokenlens request-stats out/dm3/tokens.parquet --out out/dm3/requests.parquet
  tokenlens request-figures out/dm3/requests.parquet --out out/dm3/request-figures.json
  tokenlens request-figures stats-from-the-cluster/ --bootstrap 2000 --seed 7 \\
      --out fleet-figures.json
"""


def register(subparsers: Any) -> None:
    """Add the ``request-figures`` subcommand to the root parser's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "request-figures",
        help="acceptance, text per step and a class breakdown, with intervals, from "
        "request-stats' table",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "source", metavar="TABLE", type=Path, help="request-stats' output (file or directory)"
    )
    parser.add_argument(
        "--out", required=True, type=Path, metavar="FILE", help="JSON output (not overwritten)"
    )
    add_bootstrap_options(parser, "groups with fewer rows are flagged sparse")
    add_interval_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Compute the figures; write them; print where."""
    from tokenlens.analysis.request_figures import FiguresConfig, write_figures

    config = FiguresConfig(args.seed, args.bootstrap, args.min_count, args.interval)
    write_figures(args.source, args.out, config)
    say(str(args.out))
    return 0
