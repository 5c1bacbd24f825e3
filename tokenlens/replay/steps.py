"""vLLM's verification steps as a pure function of the target's tokens and the drafts.

What vLLM 0.32 does for one greedy request (``Scheduler.schedule``,
``Scheduler.update_from_output``, the model runner's drafter call), and so what
:func:`replay_request` does:

- The prefill step samples output token 0 with no drafts; drafting starts after it.
- After every step the drafter proposes for the request's current length ``L``. The
  scheduler then keeps ``min(len(drafts), max_model_len - P - L - 1)`` of them
  (``num_new_tokens`` is capped so that the sampled token still fits); with none left
  the step is a plain decode step and vLLM counts no draft.
- The target accepts the longest prefix of drafts equal to its own greedy tokens and
  emits one more token (the correction at the first rejection, or the bonus token
  after k accepted drafts). vLLM counts every scheduled draft and every accepted one,
  even past a stop: tokens are appended one by one and a stop (EOS, stop token,
  ``max_tokens``, ``max_model_len``) discards the rest of the step.
- Before the next proposal, the model runner checks that the step's sequence length
  (computed + scheduled tokens) + k fits the drafter's ``max_model_len``
  (``GPUModelRunner._input_fits_in_drafter``, for every method, n-gram included); if
  not, the drafts are k zeros. vLLM takes the longest sequence of the batch, replay
  this request's: exact with one request in flight or away from ``max_model_len``.

Judging drafts past the end of the output needs the target's tokens there (the
greedy continuation it never emitted); :class:`NeedLookahead` says how many.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Branch:
    """A draft proposed after a rejected one: the drafter's own continuation.

    ``point`` is the output index where the drafter's greedy token left the target's
    (that draft was rejected), ``offset`` the index into the drafter's continuation
    from there. Never judged by vLLM (it stops at the first rejection), so only its
    identity is unknown until :mod:`tokenlens.replay.passes` computes it.
    """

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
    """Judging a draft needs the target's token ``count`` places after the output's end.

    ``rows`` are the steps before that one (complete: only the last step reaches past
    the end).
    """

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
    at the target's).
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

    ``argmax[i]`` is the drafter's greedy token for output index ``i`` given the prompt
    and ``output[:i]`` (one teacher-forced pass); ``continuation`` its greedy tokens
    after the whole output. Within a step the drafter continues from its own drafts:
    while they equal the target's tokens they are teacher-forced argmaxes, after the
    first one that differs they are a :class:`Branch`, and past the end of the output
    (all equal so far) they are ``continuation``.
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
    """vLLM's n-gram proposals along one request: ``proposals[L]`` for length ``L``.

    Computed once with the largest k: the kernel's match does not depend on k, so the
    proposal for a smaller k is a prefix of it.
    """

    proposals: tuple[tuple[int, ...], ...]

    def __call__(self, start: int, k: int) -> list[Draft]:
        return list(self.proposals[start][:k])
