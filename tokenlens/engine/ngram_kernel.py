"""vLLM's n-gram proposals at every prefix of a request, from vLLM's own kernel.

Contract: :func:`proposals_at_every_length` takes ``{"settings": NgramSettings fields,
"sequences": [{"tokens", "prompt_len"}]}`` and returns, per sequence, the proposal
vLLM makes once the request has L output tokens, for every L (entry 0: the prefill
step, no drafts). It imports vLLM, so it runs in an engine worker
(:data:`tokenlens.engine.passes.NGRAM`) or in ``python -m tokenlens.engine.ngram_kernel``
(JSON on stdin and stdout): the caller's process never imports vLLM.

``NgramProposer.propose`` (vllm/v1/spec_decode/ngram_proposer.py) skips a request whose
context has reached ``max_model_len`` and otherwise calls the numba kernel
``_find_longest_matched_ngram_and_propose_tokens`` on the request's tokens so far
(prompt + output, int32 as in vLLM's input batch) with the run's
``prompt_lookup_min``/``prompt_lookup_max`` and k. We call that same kernel.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NgramSettings:
    """What vLLM's n-gram proposer is configured with."""

    k: int
    prompt_lookup_min: int
    prompt_lookup_max: int
    max_model_len: int


def proposals_at_every_length(payload: dict[str, Any]) -> list[list[list[int]]]:
    """Per sequence, vLLM's n-gram proposal at every output length (see the module)."""
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


def main() -> None:
    payload = json.loads(sys.stdin.read())
    json.dump(proposals_at_every_length(payload), sys.stdout)


if __name__ == "__main__":
    main()
