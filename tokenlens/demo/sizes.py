"""The demo's sizes: what each one benches, traces and replays, on which prompts, and
what a smoke-sized study must say about itself (docs/study.md).

``medium`` (the default) shows that every step works; ``full`` is the verdict-grade
study that reproduces reports/full/. The wall times are measured (docs/development.md,
docs/study.md) and shown by ``tokenlens demo --help``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenlens.errors import TokenlensError
from tokenlens.packaged import corpora_dir, plans_dir
from tokenlens.trace import DEFAULT_CONCURRENCY

# Shipped with the package (a wheel) or at the root of a checkout: tokenlens.packaged.
PLANS = plans_dir()


ALL_CORPORA = "all"  # every shipped parallel corpus except the smoke one
SMOKE_CORPUS = "smoke"  # corpora/smoke.jsonl: one pair for tests, not a study


@dataclass(frozen=True)
class Replay:
    """Replays of one traced run (by name) for these methods and k (docs/replay.md)."""

    source: str
    methods: tuple[str, ...]
    ks: tuple[int, ...]
    # Also the drafter's drafts after a step's first rejection (``--branch-drafts``):
    # the rejection kinds need them to tell a re-segmentation from a byte-prefix match.
    branch_drafts: bool = False


@dataclass(frozen=True)
class Size:
    """One demo size: the bench plan, the traced runs (name, method, k) and their limits."""

    plan: str | None  # bench plan under plans/ (None: no bench)
    traces: tuple[tuple[str, str, int], ...]
    limit: int | None  # prompts per language traced (None: all)
    cap: int | None  # upper bound on every traced prompt's max_tokens
    concurrency: int  # traced requests in flight (batching is cheap on CPU)
    corpus: str = "demo"  # a shipped corpus name, or ALL_CORPORA
    # Replayed runs; when set, they are what the analysis reads and the traces that are
    # not their source only check them (docs/study.md).
    replay: Replay | None = None
    # Traces that only check the replay: --no-check-trace skips them.
    checks: tuple[str, ...] = ()
    smoke: bool = True  # too few prompts for a verdict (the output says so)
    wall: str = ""  # measured wall time on 2 CPU cores with cached models


# Sized for ~2-4 tok/s on 2 CPU cores; medium (the default) needs >= 5 traced requests
# per language, the smoke minimum. full is the verdict-grade study: >= 30 prompts per
# language (the verdict rules' minimum, docs/analysis.md), 128-token outputs, k = 1..5.
SIZES: dict[str, Size] = {
    "small": Size("demo-cpu-small.toml", (("draft_model-k3", "draft_model", 3),), 2, 48, 2),
    "medium": Size(
        "demo-cpu.toml",
        (("ngram-k3", "ngram", 3), ("draft_model-k3", "draft_model", 3)),
        5,
        28,
        5,
        wall="~14 min",  # 13 min 52 s (docs/development.md)
    ),
    "full": Size(
        None,
        (("draft_model-k3", "draft_model", 3), ("ngram-k3", "ngram", 3)),
        None,
        128,
        DEFAULT_CONCURRENCY,
        corpus=ALL_CORPORA,
        replay=Replay(
            "draft_model-k3", ("draft_model", "ngram"), (1, 2, 3, 4, 5), branch_drafts=True
        ),
        checks=("ngram-k3",),
        smoke=False,
        wall="40-90 min",  # 39 min once, 77+ min on a busier evening (docs/study.md)
    ),
}
DEFAULT_SIZE = "medium"
FULL_SIZE = "full"


def full_command(out: str = "out/full") -> str:
    """The command that runs the verdict-grade study (and reproduces reports/full/)."""
    return f"tokenlens demo --size {FULL_SIZE} --out {out}"


def smoke_note(size: str) -> str | None:
    """What a smoke-sized study's outputs must say about themselves (None: not smoke)."""
    if not SIZES[size].smoke:
        return None
    return (
        f"This is a smoke-sized study (size {size}): it shows that every step works, but "
        "it has too few prompts and too short outputs for a verdict. The verdict-grade "
        f"study ({SIZES[FULL_SIZE].wall} on 2 CPU cores, docs/study.md): "
        f"{full_command()}"
    )


def study_prompts(corpus: str, out: Path, max_tokens: int | None) -> Path:
    """The prompt file of a size: a shipped corpus, or (ALL_CORPORA) every complete
    Japanese/English pair of the shipped corpora except the smoke one, written to
    ``out`` with every prompt's ``max_tokens`` set to ``max_tokens`` (when given)."""
    if corpus != ALL_CORPORA:
        return corpora_dir() / f"{corpus}.jsonl"
    by_pair: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(corpora_dir().glob("*.jsonl")):
        if path.stem == SMOKE_CORPUS:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                prompt = json.loads(line)
                by_pair.setdefault(f"{path.stem}/{prompt.get('pair')}", []).append(prompt)
    lines, ids = [], set()
    for group in by_pair.values():
        if sorted(p["lang"] for p in group) != ["en", "ja"]:
            continue  # not a Japanese/English pair: no part of the study
        for prompt in group:
            if prompt["id"] in ids:
                raise TokenlensError(f"prompt id {prompt['id']!r} is in two shipped corpora")
            ids.add(prompt["id"])
            if max_tokens is not None:
                prompt["max_tokens"] = max_tokens
            lines.append(json.dumps(prompt, ensure_ascii=False))
    if not lines:
        raise TokenlensError(f"no Japanese/English pair in {corpora_dir()}")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
