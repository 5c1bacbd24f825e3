"""``corpora/MANIFEST.json``: what each corpus file holds (hash, prompts, pairs, languages,
domains, lengths), generated, never edited by hand, and checked against the files.

Its own module because it needs only the prompt reader: :mod:`tokenlens.corpora`
(the rules a corpus follows) runs :func:`manifest_problems` as one of its checks.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from tokenlens.errors import TokenlensError
from tokenlens.prompts import corpus_hash, read_prompts

MANIFEST = "MANIFEST.json"
MANIFEST_FORMAT = 1


def _tag_name(tags: Any, key: str) -> str:
    if isinstance(tags, dict) and isinstance(tags.get(key), str):
        return str(tags[key])
    return "(none)"


def describe_file(path: Path) -> dict[str, Any]:
    """The manifest entry of one prompt file: its SHA-256 (the hash a run's signature
    carries, :func:`tokenlens.prompts.corpus_hash`), prompts, pairs, and the prompts
    per language, ``tags.domain`` and ``tags.length``, and the ``max_tokens`` used."""
    prompts = read_prompts(path)
    return {
        "sha256": corpus_hash(path),
        "prompts": len(prompts),
        "pairs": len({p.pair for p in prompts if p.pair is not None}),
        "languages": dict(sorted(Counter(p.lang for p in prompts).items())),
        "domains": dict(sorted(Counter(_tag_name(p.tags, "domain") for p in prompts).items())),
        "lengths": dict(sorted(Counter(_tag_name(p.tags, "length") for p in prompts).items())),
        "max_tokens": sorted({p.max_tokens for p in prompts if p.max_tokens is not None}),
    }


def build_manifest(directory: Path) -> dict[str, Any]:
    """The manifest of every ``*.jsonl`` file directly in ``directory``."""
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        raise TokenlensError(f"no *.jsonl prompt files in {directory}")
    entries = {f.name: describe_file(f) for f in files}
    return {
        "format": MANIFEST_FORMAT,
        "generated_by": "tokenlens corpora manifest",
        "total_prompts": sum(e["prompts"] for e in entries.values()),
        "total_pairs": sum(e["pairs"] for e in entries.values()),
        "files": entries,
    }


def render_manifest(manifest: dict[str, Any]) -> str:
    """Deterministic text of the manifest (stable key order, trailing newline)."""
    return json.dumps(manifest, ensure_ascii=False, indent=2) + "\n"


def manifest_diff(expected: dict[str, Any], actual: Any) -> list[str]:
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


def manifest_problems(directory: Path, manifest: Path | None = None) -> list[str]:
    """Why the stored manifest (default ``directory/MANIFEST.json``) is not what the
    files give; empty when it is, byte for byte."""
    path = manifest or directory / MANIFEST
    fresh = build_manifest(directory)
    if not path.is_file():
        return [f"{path}: missing (run tokenlens corpora manifest)"]
    text = path.read_text(encoding="utf-8")
    try:
        stored = json.loads(text)
    except json.JSONDecodeError as exc:
        return [f"{path}: not valid JSON ({exc.msg})"]
    problems = [f"{path.name}: {p}" for p in manifest_diff(fresh, stored)]
    if not problems and text != render_manifest(fresh):
        problems = [f"{path.name}: same content but not in the canonical layout"]
    return problems


def write_manifest(directory: Path, manifest: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """Write the manifest of ``directory`` (default ``directory/MANIFEST.json``);
    returns its path and content."""
    path = manifest or directory / MANIFEST
    fresh = build_manifest(directory)
    path.write_text(render_manifest(fresh), encoding="utf-8")
    return path, fresh
