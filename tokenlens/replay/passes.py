"""The vLLM passes a replay needs, each one batch of greedy requests in an engine.

- Drafter pass (draft model): prompt + output as the prompt, with ``prompt_logprobs``:
  vLLM returns, at every position, the drafter's top tokens given everything before
  it, so the rank-1 token is the drafter's greedy proposal there (teacher forced:
  the context is the target's tokens, as it is in vLLM's proposer while drafts are
  being accepted). The same request continues greedily for k-1 tokens: what the
  drafter proposes past the end of the output.
- Branch pass (draft model, optional): the drafter's greedy continuation after each
  token where it left the target's: the identities of drafts proposed after a
  rejected one (vLLM never judges them).
- Look-ahead pass (target): the target's greedy tokens after the output's end, where
  a step's drafts reach past a stop and vLLM still judged them.

:func:`greedy` runs inside the engine worker (``Engine.call``); everything else here
runs in the caller's process and never imports vLLM.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from tokenlens.engine.backend import Started
from tokenlens.engine.config import EngineConfig
from tokenlens.progress import Progress

GREEDY = "tokenlens.replay.passes:greedy"


class Worker(Started, Protocol):
    """What a replay needs of an engine: run a function next to the model
    (:meth:`tokenlens.engine.runner.Engine.call`), as a context manager."""

    def call(self, function: str, *args: Any) -> Any: ...


StartWorker = Callable[[EngineConfig, Path, Progress], Worker]
"""Makes a replay's engine from its config, log file and progress: vLLM's ``Engine`` by
default; tests pass a fake (``tests/support.py``)."""


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
    """Run in the engine worker: every request greedy, EOS ignored, top-2 logprobs."""
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


def run(engine: Worker, requests: Sequence[PassRequest]) -> list[PassResult]:
    """One pass in a running engine (the caller sets the progress stage)."""
    if not requests:
        return []
    result: list[PassResult] = engine.call(GREEDY, list(requests))
    return result
