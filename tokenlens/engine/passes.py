"""The engine's own operations besides generating: what a caller may ask of a running
engine by name (``Engine.call(operation, *args)``), and nothing else.

Contract: :data:`OPERATIONS` maps an operation's name to a function
``function(llm, *args, progress=...)`` of this room that runs inside the engine worker,
next to vLLM. The worker looks a name up here and runs it; it never imports a module by
a name it was sent, so no caller above the engine can make it run their code.

- :data:`GREEDY`: every :class:`PassRequest` greedy (EOS ignored) with top-2 logprobs,
  and with ``score_prompt`` the argmax at every prompt position (``prompt_logprobs``):
  teacher-forced scoring and look-ahead for :mod:`tokenlens.replay`.
- :data:`NGRAM`: vLLM's n-gram kernel at every prefix
  (:func:`tokenlens.engine.ngram_kernel.proposals_at_every_length`), where vLLM is already
  imported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tokenlens.engine.ngram_kernel import proposals_at_every_length

GREEDY, NGRAM = "greedy", "ngram"


@dataclass(frozen=True)
class PassRequest:
    """Greedy generation from ``tokens``; with ``score_prompt``, the argmax at every position."""

    tokens: tuple[int, ...]
    max_tokens: int
    score_prompt: bool = False


@dataclass(frozen=True)
class PassResult:
    """``argmax[i]``: greedy token for position i of the prompt given ``tokens[:i]``.

    ``margin[i]`` is its logprob minus the runner-up's (the logit margin: a near-tie
    when small). Index 0 has no prediction (-1, nan). ``generated`` are the greedy
    tokens after the prompt, with their margins.
    """

    argmax: tuple[int, ...]
    margin: tuple[float, ...]
    generated: tuple[int, ...]
    generated_margin: tuple[float, ...]


def _top(entry: dict[int, Any] | None) -> tuple[int, float]:
    """(rank-1 token, its logprob minus the rank-2 one's) of one vLLM logprobs entry."""
    if not entry:
        return -1, float("nan")
    ranked = sorted(entry.items(), key=lambda kv: kv[1].rank)
    best = ranked[0]
    runner = next((lp for tid, lp in ranked[1:] if lp.rank == 2), None)
    margin = best[1].logprob - runner.logprob if runner is not None else float("inf")
    return int(best[0]), float(margin)


def greedy(
    llm: Any, requests: Sequence[PassRequest], progress: Callable[[int], None]
) -> list[PassResult]:
    """Every request greedy, EOS ignored, top-2 logprobs (in the engine worker)."""
    from vllm import SamplingParams

    engine = llm.llm_engine
    for i, req in enumerate(requests):
        params = SamplingParams(
            max_tokens=req.max_tokens,
            temperature=0.0,
            ignore_eos=True,  # the drafter's proposals and the target's tokens go on past EOS
            logprobs=2,
            prompt_logprobs=2 if req.score_prompt else None,
            detokenize=False,
        )
        engine.add_request(str(i), {"prompt_token_ids": list(req.tokens)}, params)
    finished: dict[str, Any] = {}
    while engine.has_unfinished_requests():
        for output in engine.step():
            if output.finished:
                finished[output.request_id] = output
                progress(1)
    results = []
    for i in range(len(requests)):
        out = finished[str(i)]
        seq = out.outputs[0]
        scored = [_top(e) for e in (out.prompt_logprobs or [])]
        gen = [_top(e) for e in (seq.logprobs or [])]
        results.append(
            PassResult(
                argmax=tuple(t for t, _ in scored),
                margin=tuple(m for _, m in scored),
                generated=tuple(int(t) for t in seq.token_ids),
                generated_margin=tuple(m for _, m in gen),
            )
        )
    return results


def _ngram(llm: Any, payload: dict[str, Any], progress: Any) -> list[list[list[int]]]:
    return proposals_at_every_length(payload)


OPERATIONS: dict[str, Callable[..., Any]] = {GREEDY: greedy, NGRAM: _ngram}
