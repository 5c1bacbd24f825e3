"""What a generation returns: per-request outputs and vLLM's spec-decode counters.

Plain dataclasses so they cross the worker's socket as pickles and are written into run
directories without touching vLLM types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

# vLLM's own metric names (``LLM.get_metrics()`` and the server's /metrics).
NUM_DRAFTS = "vllm:spec_decode_num_drafts"
NUM_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
NUM_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


@dataclass(frozen=True)
class SpecCounters:
    """vLLM's spec-decode counters, as reported by vLLM (never recomputed by us)."""

    num_drafts: int = 0
    num_draft_tokens: int = 0
    num_accepted_tokens: int = 0
    accepted_per_position: tuple[int, ...] = ()

    def padded(self, width: int) -> SpecCounters:
        """The same counters with ``accepted_per_position`` zero-padded to ``width``.

        A position vLLM never reported and a position with zero accepted drafts are the
        same count; padding is the one place that says so.
        """
        missing = width - len(self.accepted_per_position)
        if missing <= 0:
            return self
        return replace(self, accepted_per_position=self.accepted_per_position + (0,) * missing)

    def _combine(self, other: SpecCounters, sign: int) -> SpecCounters:
        width = max(len(self.accepted_per_position), len(other.accepted_per_position))
        mine, theirs = self.padded(width), other.padded(width)
        return SpecCounters(
            num_drafts=self.num_drafts + sign * other.num_drafts,
            num_draft_tokens=self.num_draft_tokens + sign * other.num_draft_tokens,
            num_accepted_tokens=self.num_accepted_tokens + sign * other.num_accepted_tokens,
            accepted_per_position=tuple(
                a + sign * b
                for a, b in zip(
                    mine.accepted_per_position, theirs.accepted_per_position, strict=True
                )
            ),
        )

    def __sub__(self, before: SpecCounters) -> SpecCounters:
        """Counter difference (after - before): the activity of one run or case."""
        return self._combine(before, -1)

    def __add__(self, other: SpecCounters) -> SpecCounters:
        """Counter sum: the activity of several runs (repeats, requests) together."""
        return self._combine(other, 1)

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted draft tokens / draft tokens, vLLM's definition."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else None

    @property
    def mean_acceptance_length(self) -> float | None:
        """1 + accepted per draft: tokens emitted per verification step."""
        return 1 + self.num_accepted_tokens / self.num_drafts if self.num_drafts else None

    def to_json(self) -> dict[str, Any]:
        """The ``metrics.json`` form of a run directory."""
        return {
            "num_drafts": self.num_drafts,
            "num_draft_tokens": self.num_draft_tokens,
            "num_accepted_tokens": self.num_accepted_tokens,
            "accepted_per_position": list(self.accepted_per_position),
        }

    @classmethod
    def from_metric(
        cls, name: str, value: float | Sequence[float], position: int | None = None
    ) -> SpecCounters:
        """One sample of one of vLLM's counters as counters (zero elsewhere).

        Summing these over samples (label sets, engines) gives vLLM's totals: the offline
        ``LLM.get_metrics()`` reports ``accepted_per_pos`` as one vector, the server's
        Prometheus text as one sample per ``position`` label. Other names count nothing.
        """
        if name == ACCEPTED_PER_POS:
            if isinstance(value, Sequence):
                return cls(accepted_per_position=tuple(int(v) for v in value))
            assert position is not None, "a per-position sample needs its position"
            return cls(accepted_per_position=(0,) * position + (int(value),))
        assert not isinstance(value, Sequence)
        if name == NUM_DRAFTS:
            return cls(num_drafts=int(value))
        if name == NUM_DRAFT_TOKENS:
            return cls(num_draft_tokens=int(value))
        if name == NUM_ACCEPTED:
            return cls(num_accepted_tokens=int(value))
        return cls()

    @classmethod
    def from_request_metrics(cls, metrics: dict[str, Any]) -> SpecCounters:
        """Counters from vLLM's per-request ``speculative_decoding`` object.

        Its histogram counts verification steps by how many drafts they accepted
        (index j: exactly j); position j was accepted in every step that accepted > j.
        """
        hist = [int(x) for x in metrics.get("acceptance_histogram") or ()]
        width = int(metrics.get("num_spec_tokens") or max(len(hist) - 1, 0))
        return cls(
            num_drafts=int(metrics["num_spec_steps"]),
            num_draft_tokens=int(metrics["num_draft_tokens"]),
            num_accepted_tokens=int(metrics["num_accepted_draft_tokens"]),
            accepted_per_position=tuple(sum(hist[j + 1 :]) for j in range(width)),
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SpecCounters:
        return cls(
            num_drafts=int(data["num_drafts"]),
            num_draft_tokens=int(data["num_draft_tokens"]),
            num_accepted_tokens=int(data["num_accepted_tokens"]),
            accepted_per_position=tuple(int(x) for x in data["accepted_per_position"]),
        )


@dataclass(frozen=True)
class TokenLogprobs:
    """The target's view of one emitted token: its logprob and rank, and the top-k."""

    logprob: float
    rank: int
    top_ids: tuple[int, ...]
    top_logprobs: tuple[float, ...]


@dataclass(frozen=True)
class GeneratedRequest:
    """One finished request: ids, tokens, text, and timing from vLLM's request stats."""

    prompt_id: str
    vllm_request_id: str
    prompt_token_count: int
    output_token_ids: tuple[int, ...]
    output_text: str
    finish_reason: str | None
    logprobs: tuple[TokenLogprobs, ...] | None = None
    first_token_latency: float | None = None
    # vLLM's per-request spec-decode summary where the server reports it
    # (``--per-request-spec-decode-metrics``): its ``speculative_decoding`` object.
    spec_decode: dict[str, Any] | None = None
    # The token ids vLLM actually prefilled (chat template applied): what a replay of
    # this request feeds the drafter, without re-rendering templates.
    prompt_token_ids: tuple[int, ...] | None = None


@dataclass(frozen=True)
class GenerationResult:
    """A batch of requests, the wall time of the generate call, and counter deltas."""

    requests: tuple[GeneratedRequest, ...]
    wall_seconds: float
    counters: SpecCounters
    vllm_version: str
    info: dict[str, Any] = field(default_factory=dict)
