"""Rejections by kind, defined by what the drafter wrote: did the drafter write the
target's text cut into other tokens (a re-segmentation), or other text?

For a judged rejection at position p of a step whose draft identity is known, with D the
rejected draft's bytes, E the bytes of the token the target emitted there, T the
target's output bytes from there on (E, then its following output tokens) and C = D
followed by the drafter's later drafts of the same step (positions p+1.., known in a
real trace; in a replay only with ``--branch-drafts``; an unknown (−1) or filler draft
ends what is known of C):

- ``merge``: D is longer than E and T starts with D (the drafter wrote the target's
  text as one token where the target used several: 東京 against 東, 京);
- ``confirmed``: D is a strict prefix of E and C starts with E (the drafter's own
  continuation spells the target's token: 東 then 京 against 東京);
- ``prefix_diverged``: D is a strict prefix of E and C departs from E before covering
  it (" a" then " new" against " affecting": a byte-prefix coincidence, other text);
- ``prefix_open``: D is a strict prefix of E, C agrees but ends before covering E (the
  step ended, or its later drafts are unknown): which of the two it is cannot be told,
  and it is never guessed;
- ``text``: anything else (the drafter wrote other text).

A *re-segmentation* is ``merge`` + ``confirmed``. One more value, ``unknown``, marks a
rejection the output cannot judge: D is longer than E, the output ends (``max_tokens``)
before T covers D, and what there is agrees. It is counted apart, in no share.

Per rejection three flags: ``draft_partial`` and ``emitted_partial`` (the draft, or the
target's token, ends inside a UTF-8 character when placed after the output so far), and
``rejection_whitespace`` (a re-segmentation whose two cuts differ only by whitespace or
newlines, e.g. 。 against 。\\n\\n: real, and not Japanese-specific, so shown apart).
:mod:`tokenlens.analysis.rejection_summary` turns them into shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tokenlens.arrays import I64, Mask

MERGE, CONFIRMED = "merge", "confirmed"
PREFIX_DIVERGED, PREFIX_OPEN, TEXT = "prefix_diverged", "prefix_open", "text"
UNKNOWN = "unknown"
KINDS = (MERGE, CONFIRMED, PREFIX_DIVERGED, PREFIX_OPEN, TEXT)
RESEGMENTATION = (MERGE, CONFIRMED)
CATEGORIES = (*KINDS, UNKNOWN)  # tokens.parquet's rejection_kind
FLAGS = ("draft_partial", "emitted_partial")
WHITESPACE = b" \t\n\r\x0b\x0c"


def ends_inside_char(data: bytes) -> bool:
    """Whether ``data`` ends inside a UTF-8 character (a lead byte whose continuation
    bytes have not all come). Malformed bytes are not "inside" anything: False."""
    end = len(data)
    i = end - 1
    while i >= 0 and end - i <= 4 and (data[i] & 0xC0) == 0x80:
        i -= 1
    if i < 0 or end - i > 4:
        return False
    lead = data[i]
    if lead < 0x80:
        need = 1
    elif 0xC2 <= lead <= 0xDF:
        need = 2
    elif 0xE0 <= lead <= 0xEF:
        need = 3
    elif 0xF0 <= lead <= 0xF4:
        need = 4
    else:
        return False
    return end - i < need


def rejection_kind(draft: bytes, emitted: bytes, target: bytes, complete: bool, cont: bytes) -> str:
    """The kind of one rejection (module docstring): D = ``draft``, E = ``emitted``,
    T = ``target`` (``complete`` False when the output ended before T covered D),
    C = ``cont`` (D and the drafter's known later drafts of the step)."""
    if not draft:
        return UNKNOWN  # an id the vocabulary does not define
    if len(draft) > len(emitted):
        if target.startswith(draft):
            return MERGE
        if not complete and draft.startswith(target):
            return UNKNOWN
        return TEXT
    if len(draft) < len(emitted) and emitted.startswith(draft):
        if cont.startswith(emitted):
            return CONFIRMED
        covered = min(len(cont), len(emitted))
        return PREFIX_DIVERGED if cont[:covered] != emitted[:covered] else PREFIX_OPEN
    return TEXT


def whitespace_cut(draft: bytes, emitted: bytes) -> bool:
    """Whether the longer of D and E adds only whitespace to the shorter (a
    re-segmentation at spaces or newlines)."""
    short, long = sorted((draft, emitted), key=len)
    extra = long[len(short) :]
    return bool(extra) and not extra.strip(WHITESPACE)


@dataclass(frozen=True)
class EventRows:
    """The event rows classified, as arrays: per row its request index, step, position,
    output index (−1: past the output's end), draft id (−1: hidden; fillers as −1),
    emitted id (−1: none) and whether it is a rejection to classify."""

    request: I64
    step: I64
    position: I64
    output_index: I64
    draft: I64
    emitted: I64
    rejected: Mask


def classify_rejections(
    pieces: Sequence[bytes], flat_ids: I64, offsets: I64, rows: EventRows
) -> dict[str, np.ndarray[Any, Any]]:
    """Per event row: ``rejection_kind`` (or None), ``draft_partial``,
    ``emitted_partial`` and ``rejection_whitespace`` (None where there is no kind).

    ``pieces[i]`` is token i's bytes; ``flat_ids``/``offsets`` the requests' output ids.
    """
    n = len(rows.request)
    kind = np.full(n, None, dtype=object)
    flags = {name: np.full(n, None, dtype=object) for name in (*FLAGS, "rejection_whitespace")}
    size = len(pieces)
    draft, emitted = rows.draft, rows.emitted
    order = np.lexsort((rows.position, rows.step, rows.request))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    todo = rows.rejected & (draft >= 0) & (draft < size) & (emitted >= 0)
    # Python ints from here on: the loop runs once per rejected event, and indexing
    # lists is several times faster than converting numpy scalars one by one.
    request, step, out_index = rows.request.tolist(), rows.step.tolist(), rows.output_index.tolist()
    drafts, emits, ids = draft.tolist(), emitted.tolist(), flat_ids.tolist()
    order_l, rank_l, offs = order.tolist(), rank.tolist(), offsets.tolist()
    blank = b""
    for i in np.flatnonzero(todo).tolist():
        r = request[i]
        start, stop = offs[r], offs[r + 1]
        at = start + out_index[i] if out_index[i] >= 0 else stop
        d_bytes = pieces[drafts[i]]
        e_bytes = pieces[emits[i]] if emits[i] < size else blank
        tail = blank.join([pieces[t] for t in ids[max(start, at - 4) : at] if t < size])[-4:]
        if out_index[i] >= 0:
            target = blank
            j = at
            while j < stop and len(target) < len(d_bytes):
                t = ids[j]
                target += pieces[t] if t < size else blank
                j += 1
            complete = len(target) >= len(d_bytes)
        else:
            target, complete = e_bytes, len(e_bytes) >= len(d_bytes)
        cont = d_bytes
        j = rank_l[i] + 1
        while j < n and len(cont) < len(e_bytes):
            row = order_l[j]
            if request[row] != r or step[row] != step[i]:
                break  # the step ended
            later = drafts[row]
            if later < 0 or later >= size:
                break  # an unknown draft: C is known only up to here
            cont += pieces[later]
            j += 1
        kind_i = rejection_kind(d_bytes, e_bytes, target, complete, cont)
        kind[i] = kind_i
        flags["draft_partial"][i] = ends_inside_char(tail + d_bytes)
        flags["emitted_partial"][i] = ends_inside_char(tail + e_bytes)
        if kind_i in RESEGMENTATION:
            flags["rejection_whitespace"][i] = whitespace_cut(d_bytes, e_bytes)
        elif kind_i != UNKNOWN:
            flags["rejection_whitespace"][i] = False
    return {"rejection_kind": kind, **flags}
