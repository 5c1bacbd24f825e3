"""The speculative step process over known agreement: what vLLM does with greedy drafts.

Under greedy decoding the target's output is fixed by the prompt, and whether a
drafter's proposal for output position ``t`` equals the target's token there
(``agree[r, t]``) does not depend on the step structure: the drafter sees the
target's own prefix whenever its earlier drafts of the step were accepted, and
positions after a rejection are never compared. So the events of a run follow from
``agree`` alone, exactly as vLLM produces them:

- output position 0 comes from prefill; steps start at position 1;
- a step starting at ``p`` proposes ``k`` drafts for ``p .. p+k-1`` when the drafter
  offers one (``offer[r, p]``; an n-gram drafter offers only where its lookup matches);
  otherwise the target decodes one token without drafts and no event is recorded;
- the accepted prefix is the run of ``agree == True`` from ``p``; the first rejection
  ends the step and the target's token comes out there; ``k`` acceptances add a bonus
  token at ``p+k``;
- the request stops once ``length`` tokens are out. Drafts of the last step at or
  beyond ``length`` are still judged (vLLM compared them) but have no output index.

Event rows carry the contract's fields: ``step`` counts the steps with drafts
(vLLM's ``num_drafts``), ``judged`` marks the accepted drafts and the first
rejection, ``index`` is the stream position of the token that came out there (-1 when
none) and ``output_index`` the same where it is inside the output (-1 otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tokenlens.arrays import F64, I64
from tokenlens.arrays import Mask as B


@dataclass(frozen=True)
class StepEvents:
    """One row per draft token, sorted by (request, step, position)."""

    request: I64
    step: I64
    position: I64
    accepted: B
    judged: B
    index: I64
    output_index: I64

    def __len__(self) -> int:
        return len(self.request)


def speculate(
    agree: B,
    offer: B,
    length: I64,
    k: int,
    keep: F64 | None = None,
    decay: float = 1.0,
) -> StepEvents:
    """Events of every request (row of ``agree``) for ``k`` drafts per step.

    ``agree`` and ``offer`` have one column per output position and at least
    ``max(length) + k`` columns (the last step may draft past the end). With ``keep``
    (uniform draws, the shape of ``agree``) and ``decay`` < 1, a draft at position j of
    its step is accepted only when it agrees *and* ``keep < decay ** j``: acceptance
    that drifts along the draft, breaking the rule that agreement depends on the output
    position alone (an assumption breaker of the test bed, off by default).
    """
    n, width = agree.shape
    if k < 1:
        raise ValueError("k must be at least 1")
    if len(length) != n or offer.shape != agree.shape:
        raise ValueError("agree, offer and length must describe the same requests")
    if n and width < int(length.max()) + k:
        raise ValueError("agree needs max(length) + k columns")
    ptr = np.ones(n, dtype=np.int64)
    steps = np.zeros(n, dtype=np.int64)
    cols = np.arange(k)
    parts: list[tuple[I64, I64, I64, B, B, I64, I64]] = []
    active = np.flatnonzero(ptr < length)
    while len(active):
        p = ptr[active]
        drafts = offer[active, p]
        plain = active[~drafts]
        ptr[plain] += 1
        r = active[drafts]
        if len(r):
            p = ptr[r]
            idx = p[:, None] + cols[None, :]
            ok = agree[r[:, None], idx]
            if keep is not None and decay < 1.0:
                ok = ok & (keep[r[:, None], idx] < decay ** cols[None, :])
            run = np.cumprod(ok, axis=1).astype(bool)
            n_acc = run.sum(axis=1)
            judged = cols[None, :] <= n_acc[:, None]
            index = np.where(judged, idx, -1)
            out = np.where(judged & (idx < length[r][:, None]), idx, -1)
            parts.append(
                (
                    np.repeat(r, k),
                    np.repeat(steps[r], k),
                    np.tile(cols, len(r)),
                    run.ravel(),
                    judged.ravel(),
                    index.ravel(),
                    out.ravel(),
                )
            )
            steps[r] += 1
            ptr[r] = p + n_acc + 1
        active = active[ptr[active] < length[active]]
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return StepEvents(empty, empty, empty, empty.astype(bool), empty.astype(bool), empty, empty)
    cat = [np.concatenate(col) for col in zip(*parts, strict=True)]
    order = np.lexsort((cat[2], cat[1], cat[0]))
    return StepEvents(*(c[order] for c in cat))
