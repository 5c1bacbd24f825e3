"""vLLM's n-gram proposals for a replay, and the runs whose n-gram drafter it reproduces.

Contract: :func:`proposals` returns, per request, vLLM's n-gram proposal at every
output length, computed by vLLM's own kernel
(:mod:`tokenlens.engine.ngram_kernel`): in a running engine's worker when one is up
(``Engine.call``, vLLM already imported there), else in a short-lived subprocess.
:func:`check_runner` refuses a run traced on a model runner whose n-gram drafter the
kernel does not reproduce.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from tokenlens.engine.ngram_kernel import NgramSettings
from tokenlens.engine.passes import NGRAM
from tokenlens.errors import TokenlensError

if TYPE_CHECKING:
    from tokenlens.replay.passes import Worker

KERNEL_MODULE = "tokenlens.engine.ngram_kernel"  # run as python -m, JSON in and out
V1 = "V1"  # the model runner whose n-gram proposer this module reproduces


def check_runner(manifest: dict[str, Any], run: str) -> None:
    """Refuse an n-gram replay of a run traced on a model runner it does not reproduce.

    This module reproduces the V1 runner's ``NgramProposer`` (CPU, numba kernel, no
    draft where nothing matches). Model Runner V2, vLLM's GPU default since 0.33 and
    its only runner in 0.34, drafts n-gram with ``NgramGPUSpeculator``: on the device,
    always k tokens, the last sampled token filling the slots where no n-gram matches.
    Replaying such a run with V1's proposer would report drafts its engine never made,
    so it is refused. A run without ``engine`` facts predates them: every such run was
    made on the V1 CPU build, and the replay notes nothing.
    """
    engine = manifest.get("engine")
    runner = engine.get("model_runner") if isinstance(engine, dict) else None
    if runner is not None and runner != V1:
        raise TokenlensError(
            f"cannot replay n-gram for {run}: it was traced on vLLM's model runner {runner}, "
            "whose n-gram drafter (always k drafts, filled where nothing matches) replay does "
            "not reproduce; trace --method ngram on that engine instead"
        )


def proposals(
    sequences: Sequence[tuple[Sequence[int], int]],
    settings: NgramSettings,
    engine: Worker | None = None,
) -> list[tuple[tuple[int, ...], ...]]:
    """For each ``(prompt + output tokens, prompt length)``: the proposal at every length.

    Entry ``L`` of a request's tuple is what vLLM proposes once the request has ``L``
    output tokens (entry 0 is empty: the prefill step has no drafts). With ``engine``
    the kernel runs in that engine's worker, else in a subprocess.
    """
    payload = {
        "settings": asdict(settings),
        "sequences": [{"tokens": list(tokens), "prompt_len": p} for tokens, p in sequences],
    }
    if engine is not None:
        found: list[list[list[int]]] = engine.call(NGRAM, payload)
        return [tuple(tuple(p) for p in per_request) for per_request in found]
    done = subprocess.run(
        [sys.executable, "-m", KERNEL_MODULE],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {done.returncode}"
        raise TokenlensError(f"vLLM's n-gram kernel failed: {last}")
    result: list[list[list[int]]] = json.loads(done.stdout)
    return [tuple(tuple(p) for p in per_request) for per_request in result]
