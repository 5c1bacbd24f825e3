#!/usr/bin/env python3
"""Write or verify ``corpora/MANIFEST.json``: what each prompt file holds, with its hash.

For every ``*.jsonl`` file in the corpora directory the manifest records its SHA-256
(the same hash a run's signature carries, :func:`tokenlens.prompts.corpus_hash`), the
number of prompts and of pairs, and the prompts per language, per ``tags.domain``, per
``tags.length`` and the ``max_tokens`` values used. Every file is read with
:func:`tokenlens.prompts.read_prompts`, so a malformed corpus fails here too.

Usage (from the repository root)::

    python scripts/corpora_manifest.py            # rewrite corpora/MANIFEST.json
    python scripts/corpora_manifest.py --check    # exit 1 if it is out of date

``--corpora DIR`` and ``--manifest FILE`` point it at another directory or manifest.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a plain script: make ``tokenlens`` importable
    sys.path.insert(0, str(REPO))

from tokenlens.errors import TokenlensError  # noqa: E402
from tokenlens.prompts import corpus_hash, read_prompts  # noqa: E402

FORMAT = 1
DEFAULT_CORPORA = REPO / "corpora"
MANIFEST_NAME = "MANIFEST.json"


def _tag(tags: Any, key: str) -> str:
    if isinstance(tags, dict) and isinstance(tags.get(key), str):
        return tags[key]
    return "(none)"


def describe_file(path: Path) -> dict[str, Any]:
    """The manifest entry of one prompt file."""
    prompts = read_prompts(path)
    return {
        "sha256": corpus_hash(path),
        "prompts": len(prompts),
        "pairs": len({p.pair for p in prompts if p.pair is not None}),
        "languages": dict(sorted(Counter(p.lang for p in prompts).items())),
        "domains": dict(sorted(Counter(_tag(p.tags, "domain") for p in prompts).items())),
        "lengths": dict(sorted(Counter(_tag(p.tags, "length") for p in prompts).items())),
        "max_tokens": sorted({p.max_tokens for p in prompts if p.max_tokens is not None}),
    }


def build_manifest(corpora: Path) -> dict[str, Any]:
    """The manifest of every ``*.jsonl`` file directly in ``corpora``."""
    files = sorted(corpora.glob("*.jsonl"))
    if not files:
        raise TokenlensError(f"no *.jsonl prompt files in {corpora}")
    entries = {f.name: describe_file(f) for f in files}
    return {
        "format": FORMAT,
        "generated_by": "scripts/corpora_manifest.py",
        "total_prompts": sum(e["prompts"] for e in entries.values()),
        "total_pairs": sum(e["pairs"] for e in entries.values()),
        "files": entries,
    }


def render(manifest: dict[str, Any]) -> str:
    """Deterministic text of the manifest (stable key order, trailing newline)."""
    return json.dumps(manifest, ensure_ascii=False, indent=2) + "\n"


def diff(expected: dict[str, Any], actual: Any) -> list[str]:
    """Human-readable differences between the fresh manifest and the stored one."""
    if not isinstance(actual, dict):
        return ["stored manifest is not a JSON object"]
    problems = []
    exp_files, act_files = expected.get("files", {}), actual.get("files", {})
    if not isinstance(act_files, dict):
        return ["stored manifest has no 'files' object"]
    for name in sorted(set(exp_files) - set(act_files)):
        problems.append(f"{name}: not in the manifest")
    for name in sorted(set(act_files) - set(exp_files)):
        problems.append(f"{name}: in the manifest but not in the corpora directory")
    for name in sorted(set(exp_files) & set(act_files)):
        for key, value in exp_files[name].items():
            if act_files[name].get(key) != value:
                problems.append(
                    f"{name}: {key} is {act_files[name].get(key)!r}, files say {value!r}"
                )
    for key in ("format", "total_prompts", "total_pairs"):
        if actual.get(key) != expected.get(key):
            problems.append(f"{key} is {actual.get(key)!r}, files say {expected.get(key)!r}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--check", action="store_true", help="verify instead of writing; exit 1 on mismatch"
    )
    ap.add_argument("--corpora", type=Path, default=DEFAULT_CORPORA, help="corpora directory")
    ap.add_argument(
        "--manifest", type=Path, default=None, help="manifest path (default: CORPORA/MANIFEST.json)"
    )
    args = ap.parse_args(argv)
    manifest_path = args.manifest or args.corpora / MANIFEST_NAME
    try:
        manifest = build_manifest(args.corpora)
    except TokenlensError as exc:
        print(f"corpora_manifest: error: {exc}", file=sys.stderr)
        return 2
    text = render(manifest)
    counts = f"{len(manifest['files'])} files, {manifest['total_prompts']} prompts"
    if not args.check:
        manifest_path.write_text(text, encoding="utf-8")
        print(f"wrote {manifest_path}: {counts}")
        return 0
    if not manifest_path.is_file():
        print(
            f"corpora_manifest: {manifest_path} is missing; run scripts/corpora_manifest.py",
            file=sys.stderr,
        )
        return 1
    stored_text = manifest_path.read_text(encoding="utf-8")
    try:
        stored = json.loads(stored_text)
    except json.JSONDecodeError as exc:
        print(f"corpora_manifest: {manifest_path} is not valid JSON ({exc.msg})", file=sys.stderr)
        return 1
    problems = diff(manifest, stored)
    if not problems and stored_text != text:
        problems = ["same content but not in the canonical layout"]
    if problems:
        for line in problems:
            print(f"corpora_manifest: {line}", file=sys.stderr)
        print("corpora_manifest: out of date; run scripts/corpora_manifest.py", file=sys.stderr)
        return 1
    print(f"{manifest_path}: up to date ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
