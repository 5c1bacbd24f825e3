"""vLLM's n-gram proposals at every prefix of a request, from vLLM's own kernel.

``NgramProposer.propose`` (vllm/v1/spec_decode/ngram_proposer.py) skips a request
whose context has reached ``max_model_len`` and otherwise calls the numba kernel
``_find_longest_matched_ngram_and_propose_tokens`` on the request's tokens so far
(prompt + output, int32 as in vLLM's input batch) with the run's
``prompt_lookup_min``/``prompt_lookup_max`` and k. We call that same kernel.

It runs where vLLM is already imported when it can: in the drafter's engine worker
(``Engine.call``) when a draft model is replayed too; otherwise in a short-lived
subprocess (``python -m tokenlens.replay.ngram``, JSON on stdin and stdout).
Importing vLLM takes seconds and logs to the terminal, and the caller's process never
imports vLLM (see :mod:`tokenlens.engine`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from tokenlens.errors import TokenlensError

if TYPE_CHECKING:
    from tokenlens.replay.passes import Worker

IN_ENGINE = "tokenlens.replay.ngram:in_engine"
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


@dataclass(frozen=True)
class NgramSettings:
    """What vLLM's n-gram proposer is configured with."""

    k: int
    prompt_lookup_min: int
    prompt_lookup_max: int
    max_model_len: int


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
        found: list[list[list[int]]] = engine.call(IN_ENGINE, payload)
        return [tuple(tuple(p) for p in per_request) for per_request in found]
    done = subprocess.run(
        [sys.executable, "-m", "tokenlens.replay.ngram"],
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


def _compute(payload: dict[str, Any]) -> list[list[list[int]]]:
    import numpy as np
    from vllm.v1.spec_decode.ngram_proposer import (
        _find_longest_matched_ngram_and_propose_tokens as kernel,
    )

    s = NgramSettings(**payload["settings"])
    out: list[list[list[int]]] = []
    for seq in payload["sequences"]:
        tokens = np.asarray(seq["tokens"], dtype=np.int32)
        prompt_len = int(seq["prompt_len"])
        per_len: list[list[int]] = [[]]
        for length in range(1, len(tokens) - prompt_len):
            num_tokens = prompt_len + length
            if num_tokens >= s.max_model_len:  # NgramProposer.propose skips these
                per_len.append([])
                continue
            drafts = kernel(
                tokens[:num_tokens],
                s.prompt_lookup_min,
                s.prompt_lookup_max,
                s.max_model_len,
                s.k,
            )
            per_len.append([int(t) for t in drafts])
        out.append(per_len)
    return out


def in_engine(llm: Any, payload: dict[str, Any], progress: Any) -> list[list[list[int]]]:
    """``Engine.call`` entry: the kernel inside an engine worker (vLLM already imported)."""
    return _compute(payload)


def main() -> None:
    payload = json.loads(sys.stdin.read())
    json.dump(_compute(payload), sys.stdout)


if __name__ == "__main__":
    main()
