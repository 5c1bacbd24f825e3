"""``tokenlens corpora``: check the prompt corpora against their rules; write or check
their manifest."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tokenlens.cli.common import formatter, say
from tokenlens.errors import TokenlensError

HELP = """\
The corpora are parallel Japanese/English prompt files (docs/corpora.md). `check`
applies every rule to every file: each prompt paired with its translation, both
asking for the output language and the same length, texts of similar size, enough
pairs per domain and length, demo and smoke files small, and MANIFEST.json up to
date. `manifest` rewrites MANIFEST.json (hash, prompts, pairs, languages, domains,
lengths and max_tokens per file); with --check it only says whether it is current.

Without --dir, the corpora shipped with tokenlens.

examples:
  tokenlens corpora check
  tokenlens corpora manifest
  tokenlens corpora manifest --check --dir my-corpora
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "corpora",
        help="check the prompt corpora against their rules; write their manifest",
        description=HELP,
        formatter_class=formatter(),
    )
    parser.add_argument("action", choices=("check", "manifest"))
    parser.add_argument("--dir", type=Path, help="corpora directory (default: the shipped one)")
    parser.add_argument("--manifest", type=Path, help="manifest file (default: DIR/MANIFEST.json)")
    parser.add_argument("--check", action="store_true", help="manifest: verify instead of writing")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tokenlens.corpora import check_corpora, corpora_dir
    from tokenlens.corpus_manifest import manifest_problems, write_manifest

    directory: Path = args.dir or corpora_dir()
    if not directory.is_dir():
        raise TokenlensError(f"{directory}: not a directory")
    if args.action == "manifest" and not args.check:
        path, manifest = write_manifest(directory, args.manifest)
        say(f"wrote {path}: {len(manifest['files'])} files, {manifest['total_prompts']} prompts")
        return 0
    if args.action == "manifest":
        problems = manifest_problems(directory, args.manifest)
    else:
        problems = check_corpora(directory)
    for problem in problems:
        say(problem)
    if problems:
        plural = "" if len(problems) == 1 else "s"
        raise TokenlensError(f"{len(problems)} problem{plural} in {directory} (listed above)")
    say(f"{directory}: {'manifest up to date' if args.action == 'manifest' else 'all rules hold'}")
    return 0
