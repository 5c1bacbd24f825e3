"""vLLM's verification steps as a pure function of the target's tokens and the drafts.

:func:`replay_request` returns the event rows vLLM 0.32 records for one greedy request
with k drafts per step; it raises :class:`NeedLookahead` when a draft must be judged
against target tokens past the output's end. The rules it applies (prefill without
drafts, the ``max_model_len`` caps, the drafter-fit check, stops mid-step):
docs/replay.md, "Why it is exact".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Branch:
    """A never-judged draft after a rejected one: index ``offset`` of the drafter's own
    continuation from output index ``point`` (where its draft was rejected). Its token
    id is filled in by :mod:`tokenlens.replay.passes`."""

    point: int
    offset: int


Draft = int | Branch
# (start L, k) -> the drafts vLLM's proposer returns for a request of length L
DraftFn = Callable[[int, int], Sequence[Draft]]


@dataclass(frozen=True)
class Tokens:
    """One request as the target produced it, plus what is known after its end."""

    request_id: str
    prompt_len: int
    output: tuple[int, ...]
    # The target's greedy tokens after the output's last token (never emitted by vLLM).
    lookahead: tuple[int, ...] = ()


@dataclass(frozen=True)
class Row:
    """One event row of one request (see docs/formats.md, events.parquet)."""

    step: int
    position: int
    draft: Draft
    accepted: bool
    emitted: int | None
    output_index: int | None


class NeedLookahead(Exception):
    """Raised when judging a draft needs the target's token ``count`` places past the
    output's end; ``rows`` are the complete steps before that one."""

    def __init__(self, count: int, rows: list[Row] | None = None) -> None:
        super().__init__(f"needs {count} target token(s) after the end of the output")
        self.count = count
        self.rows = rows or []


def replay_request(
    tokens: Tokens,
    drafts: DraftFn,
    k: int,
    max_model_len: int,
    drafter_max_model_len: int | None = None,
) -> list[Row]:
    """The event rows vLLM would record for this request with ``k`` drafts per step.

    ``drafter_max_model_len`` defaults to ``max_model_len`` (vLLM caps the drafter's
    at the target's). Raises :class:`NeedLookahead` when ``tokens.lookahead`` is too short.
    """
    drafter_limit = max_model_len if drafter_max_model_len is None else drafter_max_model_len
    out, prompt_len = tokens.output, tokens.prompt_len
    end = len(out)

    def target(i: int) -> int:
        if i < end:
            return out[i]
        j = i - end
        if j < len(tokens.lookahead):
            return tokens.lookahead[j]
        raise NeedLookahead(j + 1)

    rows: list[Row] = []
    step = 0
    start = 1  # output token 0 comes from the prefill step, without drafts
    seq_len = prompt_len  # the prefill step's sequence length
    while start < end:
        room = max_model_len - prompt_len - start - 1
        fits = seq_len + k <= drafter_limit
        spec = (list(drafts(start, k)) if fits else [0] * k)[: max(room, 0)]
        if not spec:  # a plain decode step: vLLM counts nothing
            seq_len = prompt_len + start
            start += 1
            continue
        accepted = 0
        try:
            while accepted < len(spec) and spec[accepted] == target(start + accepted):
                accepted += 1
        except NeedLookahead as missing:
            raise NeedLookahead(missing.count, rows) from None
        kept = min(accepted + 1, end - start)
        for j, draft in enumerate(spec):
            emitted = target(start + j) if j <= accepted else None
            rows.append(
                Row(
                    step=step,
                    position=j,
                    draft=draft,
                    accepted=j < accepted,
                    emitted=emitted,
                    output_index=start + j if j < kept else None,
                )
            )
        seq_len = prompt_len + start + len(spec)
        start += kept
        step += 1
    return rows


@dataclass(frozen=True)
class DraftModelView:
    """A draft model's proposals along one request, from its greedy predictions.

    ``argmax[i]``: the drafter's greedy token at output index ``i`` given prompt +
    ``output[:i]``; ``continuation``: its greedy tokens after the whole output. A step's
    drafts are argmaxes while they match the output, :class:`Branch` after the first
    mismatch, and ``continuation`` past the output's end.
    """

    output: tuple[int, ...]
    argmax: tuple[int, ...]
    continuation: tuple[int, ...]

    def __call__(self, start: int, k: int) -> list[Draft]:
        end = len(self.output)
        drafts: list[Draft] = []
        branch: int | None = None
        for i in range(start, start + k):
            if branch is not None:
                drafts.append(Branch(branch, i - branch - 1))
            elif i < end:
                drafts.append(self.argmax[i])
                if self.argmax[i] != self.output[i]:
                    branch = i
            elif i - end < len(self.continuation):
                drafts.append(self.continuation[i - end])
            else:
                break  # past max_model_len: the scheduler never schedules these
        return drafts


@dataclass(frozen=True)
class NgramView:
    """vLLM's n-gram proposals along one request: ``proposals[L]`` for length ``L``,
    computed with the largest k (a smaller k's proposal is its prefix)."""

    proposals: tuple[tuple[int, ...], ...]

    def __call__(self, start: int, k: int) -> list[Draft]:
        return list(self.proposals[start][:k])
