"""``tokenlens analyze``: traces -> acceptance by class, the JA-EN gap, H1/H2 verdicts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tokenlens.cli.common import add_progress_flag, positive_int, progress_for, say

DESCRIPTION = """\
Align every draft event of one or more traced runs with the token that came out,
classify it (script, part of speech, particle, morpheme boundary, BPE rank, the
target's own confidence), and answer: where does Japanese lose acceptance, and why?

Two denominators. The per-language rate is vLLM's: accepted draft tokens / all draft
tokens. Rates by token class count only *judged* positions (every accepted draft and
the first rejected one of each step), each classified by the token that came out
there; later positions were never compared with the target.

Every interval is a 95% percentile bootstrap that resamples whole requests (tokens of
one request are not independent), seeded by --seed. The Japanese - English gap is
split into composition (Japanese has more hard positions) and within-class parts, and
two verdicts are given: H1 (tokenization / text structure) and H2 (training data),
each supported, not_supported or inconclusive, with the numbers behind it.

Give an n-gram run beside a trained drafter's: H1 must show for n-gram drafting too,
and H2 predicts that trained drafters lose relatively more on Japanese. Trace with
top-k logprobs so that "at equal target confidence" can be measured.

Writes DIR/tokens.parquet (one row per draft event), DIR/summary.json and DIR/tables.md.
See docs/analysis.md for every definition and rule.

Before any work every input is checked, and analyze refuses in one line: token ids
that do not decode to the request's text with the run's tokenizer (or --tokenizer),
runs with different tokenizers (without --tokenizer), a run given twice (the same
directory, or a copy), a partial run (without --allow-partial), events that do not
match the run's counters (without --allow-unreconciled), and an --out that is a file
or holds files analyze did not write (without --overwrite). Runs let through by an
--allow flag are named at the top of the report and FINDINGS.
"""

EPILOG = """\
examples:
  tokenlens analyze runs/dm3 --out out/dm3
  tokenlens analyze runs/dm3 runs/ngram3 --out out/compare
  tokenlens analyze runs/dm3 --out out/dm3 --bootstrap 2000 --seed 7
  tokenlens analyze runs/dm3 --out out/dm3 --draft-cost 0.3
  tokenlens analyze runs/dm* --out out/all --bench out/bench
  tokenlens analyze runs/crashed --out out/crashed --allow-partial

--draft-cost is the cost of one draft token relative to one target forward pass
(the speed model's c); without it, --bench fits c from measured tok/s, else a
per-method default (0 for n-gram, 0.1 otherwise) is used and marked as such.
"""


def register(subparsers: Any) -> None:
    """Add the ``analyze`` subcommand to the root parser's subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "analyze",
        help="acceptance by token class, the JA-EN gap, H1/H2 verdicts",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="traced run directory")
    parser.add_argument(
        "--out", required=True, type=Path, metavar="DIR", help="output directory (created)"
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    parser.add_argument(
        "--bootstrap",
        type=positive_int,
        default=1000,
        metavar="N",
        help="bootstrap replicates (default: %(default)s)",
    )
    parser.add_argument(
        "--min-count",
        type=positive_int,
        default=30,
        metavar="N",
        help="groups with fewer judged rows are flagged sparse and left out of the "
        "decomposition and verdicts (default: %(default)s)",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="T",
        help="override the runs' tokenizer (built-in name or tokenizer.json path)",
    )
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.02,
        metavar="D",
        help="practical threshold of the verdicts, in acceptance (default: %(default)s)",
    )
    parser.add_argument(
        "--draft-cost", type=float, metavar="C", help="draft cost / target cost for the speed model"
    )
    parser.add_argument(
        "--bench",
        type=Path,
        metavar="DIR",
        help="a tokenlens bench output (or its results.csv) to fit the draft cost from",
    )
    parser.add_argument(
        "--no-regression", action="store_true", help="skip the logistic regression (faster)"
    )
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="analyse partial runs (a trace that did not finish) instead of refusing them",
    )
    parser.add_argument(
        "--allow-unreconciled",
        action="store_true",
        help="analyse runs whose events do not match their counters instead of refusing them",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="write into an --out directory that holds files analyze did not write",
    )
    add_progress_flag(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Parse the options into a config, analyse, print where the outputs are."""
    from tokenlens.analysis import AnalyzeConfig, run_analyze

    config = AnalyzeConfig(
        runs=tuple(args.runs),
        out=args.out,
        seed=args.seed,
        n_boot=args.bootstrap,
        min_count=args.min_count,
        tokenizer=args.tokenizer,
        delta=args.threshold,
        draft_cost=args.draft_cost,
        bench=args.bench,
        regression=not args.no_regression,
        allow_partial=args.allow_partial,
        allow_unreconciled=args.allow_unreconciled,
        overwrite=args.overwrite,
    )
    progress = progress_for(args)
    try:
        result = run_analyze(config, progress=progress)
    finally:
        progress.close()
    for name, h in result.summary["hypotheses"].items():
        say(f"{name}: {h['verdict']}")
    say(f"report: {result.report_path}")
    say(str(result.summary_path.parent))
    return 0
