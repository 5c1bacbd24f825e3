"""``tokenlens analyze``: traces -> acceptance by class, the JA-EN gap, H1/H2 verdicts."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tokenlens.cli.common import (
    add_bootstrap_options,
    add_draft_cost_option,
    add_interval_option,
    add_progress_flag,
    add_rule_options,
    positive_int,
    progress_for,
    say,
)

# analysis.inputs.POOLING_FIELDS, named here so that the CLI starts without pandas.
COMPARE_FIELDS = ("model", "weights", "decoding", "quantization")
# analysis.overlap.OVERLAP_CHOICES, for the same reason.
OVERLAP_CHOICES = ("refuse", "keep-longest")

DESCRIPTION = """\
Align every draft event of one or more traced runs with the token that came out,
classify it (script, part of speech, particle, morpheme boundary, BPE rank, the
target's own confidence), and answer: where does Japanese lose acceptance, and why?

Two denominators. The per-language rate is vLLM's: accepted draft tokens / all draft
tokens. Rates by token class count only *judged* positions (every accepted draft and
the first rejected one of each step), each classified by the token that came out
there; later positions were never compared with the target.

Units of evidence are prompts: every 95% interval comes from a bootstrap that
resamples whole prompt pairs (or prompts, by language), jointly across all runs given,
seeded by --seed. The Japanese - English gap of each drafter family is split into
shared composition (Japanese has more of the positions where the target is unsure),
shared within (at equal target confidence the drafter misses more) and out of support
(rows only one language has); a part the data cannot support is "not estimable", never
zero. Two verdicts follow: H1 (tokenization / text structure) and H2 (training data),
each supported, not_supported, no_japanese_deficit, inconclusive or insufficient_data
(fewer than --min-prompts prompts per language), with the numbers behind it and the
number of prompts a verdict would need.

Give an n-gram run on the same prompts beside a trained drafter's: it is H1's check
and H2's control (H2 is the trained minus n-gram within-confidence gap). Trace with
top-k logprobs so that "at equal target confidence" can be measured.

Writes DIR/tokens.parquet (one row per draft event), DIR/outputs.parquet (the text of
every output token, for the report's token view), DIR/summary.json and DIR/tables.md,
then DIR/report.html and DIR/FINDINGS.md (the same writer as the demo's). See
docs/analysis.md for every definition and rule.

Before any work every input is checked, and analyze refuses in one line: token ids
that do not decode to the request's text with the run's tokenizer (or --tokenizer),
runs with different tokenizers (without --tokenizer), a run given twice (the same
directory, or a copy), a partial run (without --allow-partial), events that do not
match the run's counters (without --allow-unreconciled), an --out that is a file
or holds files analyze did not write (without --overwrite), runs of different target
models, weights, decoding or quantization (without --compare, which analyses each
apart), a prompt id that names different prompts in two runs, runs of one drafter that
share requests (without --overlap keep-longest), an output index that two verification
steps claim, a run whose events stop short of a request's output (without
--allow-partial), and, under --strict, prompts whose script contradicts their language
label (otherwise a warning). Tokens with NaN or infinite logprobs lose their confidence,
counted in summary.json. A run whose tables change while analyze reads it (a trace
still writing) is refused when its join reads it again. Runs let through by an --allow
flag are named at the top of the report and FINDINGS. docs/errors.md lists
what is refused, warned about and resumable.
"""

EPILOG = """\
examples:
  tokenlens analyze runs/dm3 --out out/dm3
  tokenlens analyze runs/dm3 runs/ngram3 --out out/compare
  tokenlens analyze runs/dm3 --out out/dm3 --bootstrap 2000 --seed 7
  tokenlens analyze runs/dm3 --out out/dm3 --draft-cost 0.3
  tokenlens analyze runs/dm* --out out/all --bench out/bench
  tokenlens analyze runs/crashed --out out/crashed --allow-partial
  tokenlens analyze runs/qwen-1.5b runs/qwen-7b --out out/targets --compare model
  tokenlens analyze runs/mine runs/ng3 --out out/mine --method-family my_drafter=trained

--draft-cost is the cost of one draft token relative to one target forward pass
(the speed model's c); without it, --bench fits c from measured tok/s, else a
per-family default (0 for training-free drafters, 0.1 for trained ones) is assumed,
marked as such, and no best k is recommended.

Each run's drafter family (trained or training-free: never pooled, H2's contrast) comes
from tokenlens's method table; a method it does not know is refused in one line until
--method-family declares its family.
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
    add_bootstrap_options(
        parser,
        "groups with fewer judged rows are flagged sparse in the tables and left out "
        "of the exploratory per-class comparisons",
    )
    parser.add_argument(
        "--tokenizer",
        metavar="T",
        help="override the runs' tokenizer (built-in name or tokenizer.json path)",
    )
    add_rule_options(parser)
    add_interval_option(parser)
    add_draft_cost_option(parser)
    parser.add_argument(
        "--bench",
        type=Path,
        metavar="DIR",
        help="a tokenlens bench output (or its results.csv) to fit the draft cost from",
    )
    parser.add_argument(
        "--prompts",
        type=Path,
        metavar="FILE",
        help="the prompt file the runs traced: the gap per domain (tags.domain of each "
        "prompt) with a test of heterogeneity",
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
    parser.add_argument(
        "--overlap",
        choices=OVERLAP_CHOICES,
        default="refuse",
        help="runs of one drafter (method, drafter model, k) that share requests (the same "
        "prompt) would count them twice: refuse them (default), or keep-longest: keep each "
        "shared request once, from the run where its output is longest (named in the report)",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse prompts whose script contradicts their language label (a Japanese "
        "prompt labelled en) instead of warning about them",
    )
    parser.add_argument(
        "--compare",
        action="append",
        choices=COMPARE_FIELDS,
        metavar="FIELD",
        help="runs that differ in FIELD (model, weights, decoding, quantization) are refused, "
        "never pooled; with --compare FIELD each value's runs are analysed apart into "
        "DIR/<value>/, side by side, with DIR/compare.json listing them (repeatable)",
    )
    parser.add_argument(
        "--method-family",
        action="append",
        default=[],
        metavar="METHOD=FAMILY",
        help="the drafter family (trained or training_free) of a method tokenlens's method "
        "table does not know, e.g. my_drafter=trained; a run of an unknown method is "
        "refused without it (repeatable; docs/analysis.md)",
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=None,
        metavar="N",
        help="processes that classify and join the runs' chunks of 50,000 events, and (2 "
        "or more) compute the gap and rejection sections beside the other figures "
        "(default: one per core, at most 4; 1: none forked). The outputs do not depend on it",
    )
    add_progress_flag(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Parse the options into a config, analyse, print where the outputs are."""
    from tokenlens.analysis import AnalyzeConfig, run_analyze
    from tokenlens.engine.methods import parse_declarations
    from tokenlens.report import write_analyze_report, write_tables
    from tokenlens.report.findings import FINDINGS, write_findings

    config = AnalyzeConfig(
        runs=tuple(args.runs),
        out=args.out,
        seed=args.seed,
        n_boot=args.bootstrap,
        min_count=args.min_count,
        tokenizer=args.tokenizer,
        delta=args.threshold,
        **({} if args.alpha is None else {"alpha": args.alpha}),
        draft_cost=args.draft_cost,
        bench=args.bench,
        regression=not args.no_regression,
        min_prompts=args.min_prompts,
        interval=args.interval,
        allow_partial=args.allow_partial,
        allow_unreconciled=args.allow_unreconciled,
        overwrite=args.overwrite,
        overlap=args.overlap,
        strict=args.strict,
        prompts=args.prompts,
        method_families=parse_declarations(args.method_family),
        jobs=args.jobs,
    )
    progress = progress_for(args)
    if args.compare:
        return _compare(config, tuple(dict.fromkeys(args.compare)), progress)
    try:
        result = run_analyze(config, progress=progress)
    finally:
        progress.close()
    for name, h in result.summary["hypotheses"].items():
        say(f"{name}: {h['verdict']}")
    out = result.summary_path.parent
    write_tables(out)
    say(f"report: {write_analyze_report(out)}")
    write_findings(out / FINDINGS, out, args.bench)
    say(str(out))
    return 0


def _compare(config: Any, fields: tuple[str, ...], progress: Any) -> int:
    """``--compare``: one analysis per group, each with its report."""
    from tokenlens.analysis.compare import run_compare
    from tokenlens.report import write_analyze_report, write_tables
    from tokenlens.report.findings import FINDINGS, write_findings

    try:
        result = run_compare(config, fields, progress)
    finally:
        progress.close()
    for done in result.groups:
        verdicts = ", ".join(
            f"{name}: {h['verdict']}" for name, h in done.result.summary["hypotheses"].items()
        )
        say(f"{done.group.label}: {verdicts}")
        out = done.result.summary_path.parent
        write_tables(out)
        say(f"  report: {write_analyze_report(out)}")
        write_findings(out / FINDINGS, out, config.bench)
    say(str(result.compare_path))
    return 0
