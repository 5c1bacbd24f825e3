"""``tokenlens request-figures``: rates, gaps and one class breakdown from per-request counts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tokenlens.cli.common import (
    add_bootstrap_options,
    add_draft_cost_option,
    add_interval_option,
    add_rule_options,
    say,
)

DESCRIPTION = """\
Read the table `tokenlens request-stats` wrote (a Parquet file, or Spark's directory
of parts, copied to this machine) and compute the figures that are sums of its counts,
each with the prompt-clustered bootstrap interval of `tokenlens analyze`:
- per drafter family (pooled over k, labelled so): acceptance per language (vLLM's
  rate: accepted / all drafts), the judged-rows rate, accepted tokens, characters and
  bytes per verification step, and the Japanese - English gap (all drafts, judged rows);
- per run (one drafter and k): the same rates, text per step and gaps;
- the primary family's gap section (overall, judged, relative);
- by the table's class column: its breakdown (by_script, by_pos, by_byte_length...,
  judged rows), or with --by n_bytes the gap with token byte length standardised away
  (and its split by length), or with --by position the rates by draft position per run,
  with every run's speed model (--draft-cost, else the drafter family's default cost),
  or with --by confidence the split by the target's confidence, the H2 contrast and
  the H1/H2 verdicts; from the directory of `request-stats --by all`, all of these at
  once, the verdicts with their sensitivity (each k's verdicts, the threshold's flip
  points, all tokens, the length-standardised gate).
With analyze's --seed, --bootstrap, --min-count, --interval, --threshold, --alpha,
--min-prompts and --draft-cost, the figures equal those of summary.json for the same
runs, to the last digit: a fleet's traces are counted where they lie and read here, in
the memory of the table, not of its events. The verdicts assume what analyze checks
from the run directories and a table cannot show: that no run is an approximate replay
no check trace vouches for. Not given: the decomposition by token class, the like-for-like class
contrasts, the exploration, the logistic model, rejections and domains (they need the
rows or the run directories: analyze).
"""

EPILOG = """\
examples:
  tokenlens request-stats out/dm3/tokens.parquet --out out/dm3/requests.parquet
  tokenlens request-figures out/dm3/requests.parquet --out out/dm3/request-figures.json
  tokenlens request-stats out/fleet/ --by confidence --out out/fleet-conf.parquet
  tokenlens request-figures out/fleet-conf.parquet --out fleet-verdicts.json
  tokenlens request-figures stats-from-the-cluster/ --bootstrap 2000 --seed 7 \\
      --out fleet-figures.json
"""


def register(subparsers: Any) -> None:
    """Add the ``request-figures`` subcommand to the root parser's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "request-figures",
        help="rates, gaps, text per step and a class breakdown, with intervals, from "
        "request-stats' table",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "source",
        metavar="TABLE",
        type=Path,
        help="request-stats' output: a file, Spark's directory of parts, or the directory "
        "of --by all",
    )
    parser.add_argument(
        "--out", required=True, type=Path, metavar="FILE", help="JSON output (not overwritten)"
    )
    add_bootstrap_options(parser, "groups with fewer rows are flagged sparse")
    add_interval_option(parser)
    add_rule_options(parser)
    add_draft_cost_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Compute the figures; write them; print where."""
    from tokenlens.analysis.request_figures import FiguresConfig, write_figures

    config = FiguresConfig(
        args.seed,
        args.bootstrap,
        args.min_count,
        args.interval,
        delta=args.threshold,
        min_prompts=args.min_prompts,
        draft_cost=args.draft_cost,
        **({} if args.alpha is None else {"alpha": args.alpha}),
    )
    write_figures(args.source, args.out, config)
    say(str(args.out))
    return 0
