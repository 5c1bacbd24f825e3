"""One interface to vLLM, whether tokenlens runs it or a ``vllm serve`` does.

:class:`Backend` is what trace and bench need of an engine: generate a batch of
:class:`PromptJob` into a :class:`GenerationResult` (with vLLM's counters differenced
around the batch), read vLLM's cumulative counters, and name vLLM's version. Two
implementations: :class:`tokenlens.engine.runner.Engine` (a vLLM ``LLM`` in a worker
subprocess, started on ``__enter__``) and :class:`tokenlens.engine.server.ServerClient`
(a running OpenAI-compatible server; entering it does nothing). Callers use a backend
as a context manager and never ask which one it is.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Protocol, Self

from tokenlens.engine.config import PromptJob, SamplingConfig
from tokenlens.engine.results import GenerationResult, SpecCounters


class Started(Protocol):
    """An engine used as a context manager: started on entry, stopped on exit. Shared by
    :class:`Backend` and the replay's worker (:class:`tokenlens.replay.passes.Worker`)."""

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class Backend(Started, Protocol):
    """Generate, count, name the version; ``info`` holds what the engine reported
    about itself once started (``dtype``, ``vllm_version``; empty for a server)."""

    info: dict[str, Any]

    def generate(
        self, jobs: list[PromptJob], sampling: SamplingConfig, concurrency: int = 1
    ) -> GenerationResult:
        """Generate ``jobs``, ``concurrency`` in flight; counters are this batch's."""
        ...

    def counters(self) -> SpecCounters:
        """vLLM's cumulative spec-decode counters."""
        ...

    def version(self) -> str:
        """The vLLM version that generates."""
        ...
