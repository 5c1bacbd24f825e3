"""The vLLM passes a replay needs, each one batch of greedy requests in an engine.

Contract: :func:`run` sends one batch of :class:`~tokenlens.engine.passes.PassRequest`
to a running engine (the engine's own ``greedy`` operation) and returns its
:class:`~tokenlens.engine.passes.PassResult` per request. :class:`Worker` is what a
replay needs of an engine; :data:`StartWorker` makes one (vLLM's ``Engine``, or a
test's fake). The passes:

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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from tokenlens.engine.backend import Started
from tokenlens.engine.config import EngineConfig
from tokenlens.engine.passes import GREEDY, PassRequest, PassResult
from tokenlens.progress import Progress


class Worker(Started, Protocol):
    """What a replay needs of an engine: run one of the engine's operations next to the
    model (:meth:`tokenlens.engine.runner.Engine.call`), as a context manager."""

    def call(self, operation: str, *args: Any) -> Any: ...


StartWorker = Callable[[EngineConfig, Path, Progress], Worker]
"""Makes a replay's engine from its config, log file and progress: vLLM's ``Engine`` by
default; tests pass a fake (``tests/support.py``)."""


def run(engine: Worker, requests: Sequence[PassRequest]) -> list[PassResult]:
    """One pass in a running engine (the caller sets the progress stage)."""
    if not requests:
        return []
    result: list[PassResult] = engine.call(GREEDY, list(requests))
    return result
