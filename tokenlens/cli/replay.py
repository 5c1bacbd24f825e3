"""``tokenlens replay``: one greedy run -> replayed run directories for every method and k."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tokenlens.cli.common import add_progress_flag, formatter, positive_int, progress_for, say
from tokenlens.errors import TokenlensError

HELP = """\
Replay a greedy run (any method, including none) with another drafter and any number
of draft tokens per step, without generating again: one run directory per (method, k)
under --out, in the format `trace` writes, whose events equal a real trace's row for
row (docs/replay.md).

For greedy decoding the target's tokens do not depend on the drafter. A draft model's
proposal is its own greedy continuation of the target's prefix: one teacher-forced
vLLM pass of the drafter over prompt + output gives it at every position. n-gram
proposals come from vLLM's own kernel. vLLM's step rules (first token from prefill,
drafts capped near max_model_len, stops in the middle of a step, the bonus token)
then give the events for every k. Where drafts reach past the end of an output, the
target's tokens there come from the run's events or a short target pass.

Replayed runs carry "replayed_from" (the source's signature) in manifest.json and
"replayed:<hash>" in their signature; their metrics.json holds counts derived from
the events, not vLLM's counters. The source needs prompt_token_ids in
requests.parquet (recorded by trace and bench since replay exists).

examples:
  tokenlens trace --prompts corpora/demo.jsonl --method draft_model --k 3 --out runs/dm3
  tokenlens replay runs/dm3 --method draft_model --k 1,2,3,4,5 --out runs/replay
  tokenlens replay runs/dm3 --method draft_model,ngram --k 1-8 --out runs/sweep
  tokenlens analyze runs/replay/draft_model-k1 runs/replay/draft_model-k5 --out out/k
"""


def parse_ks(text: str) -> tuple[int, ...]:
    """``1,2,5`` or ``1-8`` (or both: ``1-3,5``) -> sorted distinct positive integers."""
    ks: set[int] = set()
    for part in text.split(","):
        lo, sep, hi = part.strip().partition("-")
        try:
            values = range(int(lo), int(hi) + 1) if sep else [int(lo)]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected k values like 1,2,3 or 1-8, got {text!r}"
            ) from None
        ks.update(values)
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"k values must be positive integers, got {text!r}")
    return tuple(sorted(ks))


def parse_methods(items: list[str]) -> tuple[str, ...]:
    methods: list[str] = []
    for item in items:
        methods += [m.strip() for m in item.split(",") if m.strip() and m.strip() not in methods]
    return tuple(methods)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="events of other drafters and every k from one greedy run, without decoding again",
        description=HELP,
        formatter_class=formatter(),
    )
    p.add_argument("run", type=Path, metavar="RUN", help="a complete greedy run directory")
    p.add_argument(
        "--method",
        action="append",
        default=[],
        help="draft_model and/or ngram (repeatable, or comma-separated; default: draft_model)",
    )
    p.add_argument(
        "--k", type=parse_ks, default=(1, 2, 3, 4, 5), help="k values: 1,2,3 or 1-8 (default 1-5)"
    )
    p.add_argument("--out", required=True, type=Path, help="directory for <method>-k<k>/ runs")
    p.add_argument(
        "--draft-model",
        help="drafter for draft_model (default: the run's own, else the embedded 0.5B)",
    )
    p.add_argument(
        "--prompt-lookup-min",
        type=positive_int,
        help="n-gram: vLLM's prompt_lookup_min (default: the run's, else 1)",
    )
    p.add_argument(
        "--prompt-lookup-max",
        type=positive_int,
        help="n-gram: vLLM's prompt_lookup_max (default: the run's, else 4)",
    )
    p.add_argument("--dtype", help="vLLM dtype for the passes (default: the one the run used)")
    p.add_argument(
        "--max-model-len",
        type=positive_int,
        help="the run's max_model_len, if its manifest does not record it (default 4096)",
    )
    p.add_argument(
        "--branch-drafts",
        action="store_true",
        help="also compute the ids of drafts proposed after a rejected one (never judged by "
        "vLLM; -1 without this): one more drafter request per rejection",
    )
    p.add_argument("--cache", type=Path, help="embedded model cache directory")
    p.add_argument("--overwrite", action="store_true", help="replace existing run directories")
    add_progress_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tokenlens.replay.run import ReplayConfig, run_replay

    methods = parse_methods(args.method) or ("draft_model",)
    options = {
        key: value
        for key, value in (
            ("prompt_lookup_min", args.prompt_lookup_min),
            ("prompt_lookup_max", args.prompt_lookup_max),
        )
        if value is not None
    }
    if options and "ngram" not in methods:
        raise TokenlensError("--prompt-lookup-min/max apply to --method ngram only")
    low, high = args.prompt_lookup_min, args.prompt_lookup_max
    if low is not None and high is not None and low > high:
        raise TokenlensError(f"--prompt-lookup-min {low} exceeds --prompt-lookup-max {high}")
    config = ReplayConfig(
        source=args.run,
        out=args.out,
        methods=methods,
        ks=args.k,
        draft_model=args.draft_model,
        ngram_options=options,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        branch_drafts=args.branch_drafts,
        cache=args.cache,
        overwrite=args.overwrite,
        argv=tuple(["tokenlens", *sys.argv[1:]]),
    )
    progress = progress_for(args)
    result = run_replay(config, progress)
    progress.close()
    for path in result.runs:
        say(f"replayed run written to {path}")
    say(f"replay took {result.wall_seconds:.0f} s for {len(result.runs)} run(s)")
    return 0
