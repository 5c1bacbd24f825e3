"""Rejections by kind: did the drafter and the target disagree on the text, or only on
how it is cut into tokens?

For every rejected draft token whose identity is known (the first rejection of a step,
``draft_token_id`` not −1), with D the draft token's bytes and T the bytes the target
actually wrote from that position on (its emitted token, then its following output
tokens):

- ``split``: T starts with D. The drafter proposed the very text the target wrote, cut
  into tokens differently (a draft "東京" where the target wrote "東" then "京", or a
  draft "東" where the target wrote "東京"). Greedy acceptance compares token ids, so
  the draft is rejected although the text agrees: tokenization's cost in its purest
  form, a direct reading of H1.
- ``text``: T does not start with D: the drafter proposed other text.
- ``unknown``: the output ends before T covers D and what there is agrees (a request
  stopped inside the draft's text), so the kind cannot be told.

Two flags per rejection: ``draft_partial`` and ``emitted_partial``, whether the draft,
or the target's replacement token, ends inside a UTF-8 character when placed after the
output so far (a byte-level BPE piece of a multi-byte character).

:func:`rejection_section` reports the share of each kind and of each flag per drafter
family and language, with prompt-pair intervals, and the JA − EN difference of the
split share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tokenlens.analysis.bootstrap import Resampler, estimate
from tokenlens.analysis.breakdown import lang_codes
from tokenlens.analysis.decompose import lang_code
from tokenlens.arrays import I64, Mask

SPLIT, TEXT, UNKNOWN = "split", "text", "unknown"
KINDS = (SPLIT, TEXT, UNKNOWN)
FLAGS = ("draft_partial", "emitted_partial")


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


def rejection_kind(draft: bytes, target: bytes, complete: bool) -> str:
    """``split``, ``text`` or ``unknown`` for draft bytes D against the target's bytes T
    from the same position on; ``complete`` is False when T is all the output has left."""
    if not draft:
        return UNKNOWN
    if target.startswith(draft):
        return SPLIT
    if not complete and draft.startswith(target):
        return UNKNOWN
    return TEXT


def classify_rejections(
    pieces: Sequence[bytes],
    flat_ids: I64,
    offsets: I64,
    request: I64,
    output_index: I64,
    draft: I64,
    emitted: I64,
    rejected: Mask,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Per event row: (kind or None, draft_partial or None, emitted_partial or None).

    ``pieces[i]`` is token i's bytes; ``flat_ids``/``offsets`` the requests' output ids;
    per row its request index, output index (−1: past the output's end), draft id (−1:
    hidden), emitted id and whether it is a rejection (judged, not accepted).
    """
    n = len(request)
    kind = np.full(n, None, dtype=object)
    d_part = np.full(n, None, dtype=object)
    e_part = np.full(n, None, dtype=object)
    size = len(pieces)
    for i in np.flatnonzero(rejected & (draft >= 0) & (draft < size) & (emitted >= 0)):
        r = int(request[i])
        start, stop = int(offsets[r]), int(offsets[r + 1])
        at = start + int(output_index[i]) if output_index[i] >= 0 else stop
        d_bytes = pieces[int(draft[i])]
        e_bytes = pieces[int(emitted[i])] if emitted[i] < size else b""
        tail = b"".join(pieces[int(t)] for t in flat_ids[max(start, at - 4) : at] if t < size)[-4:]
        if output_index[i] >= 0:
            target = b""
            j = at
            while j < stop and len(target) < len(d_bytes):
                t = int(flat_ids[j])
                target += pieces[t] if t < size else b""
                j += 1
            complete = len(target) >= len(d_bytes)
        else:
            target, complete = e_bytes, len(e_bytes) >= len(d_bytes)
        kind[i] = rejection_kind(d_bytes, target, complete)
        d_part[i] = ends_inside_char(tail + d_bytes)
        e_part[i] = ends_inside_char(tail + e_bytes)
    return kind, d_part, e_part


def _shares(
    frame: pd.DataFrame, rs: Resampler, rows: Mask, values: np.ndarray[Any, Any]
) -> dict[str, dict[str, Any]]:
    """Per language: the share of ``rows`` where ``values`` is true, with its interval."""
    lcode, langs = lang_codes(frame)
    num = rs.totals(values.astype(np.float64), lcode, len(langs), rows)
    den = rs.totals(np.ones(len(frame)), lcode, len(langs), rows)
    with np.errstate(divide="ignore", invalid="ignore"):
        point, boot = num.point / den.point, num.boot / den.boot
    g, h = rs.group_design(np.where(rows, lcode, -1), len(langs), rows)
    lo, hi = rs.rate_interval(point, boot, den.point, g, h)
    out = {}
    for li, lang in enumerate(langs):
        if den.point[li] == 0:
            continue
        entry = estimate(point[li], lo[li], hi[li], int(den.point[li])).to_json("share")
        entry["count"] = int(num.point[li])
        out[lang] = entry
    return out


def _difference(
    frame: pd.DataFrame, rs: Resampler, rows: Mask, values: np.ndarray[Any, Any]
) -> dict[str, Any]:
    """JA − EN of the share of ``rows`` where ``values`` is true."""
    code = lang_code(frame)
    keep = rows & (code >= 0)
    num = rs.totals(values.astype(np.float64), code, 2, keep)
    den = rs.totals(np.ones(len(frame)), code, 2, keep)
    with np.errstate(divide="ignore", invalid="ignore"):
        r_point, r_boot = num.point / den.point, num.boot / den.boot
    g, h = rs.design(keep)
    return rs.effect(
        float(r_point[0] - r_point[1]), r_boot[:, 0] - r_boot[:, 1], g, h, int(den.point.sum())
    )


def rejection_section(
    frame: pd.DataFrame, rs: Resampler, families: dict[str, Mask]
) -> dict[str, Any] | None:
    """``{families: {family: {runs, rejections {lang: n}, split, text, unknown,
    draft_partial, emitted_partial: {lang: share}, split_gap}}}`` (None without the
    ``rejection_kind`` column: a frame built before it, or a simulated one)."""
    if "rejection_kind" not in frame:
        return None
    kind = frame["rejection_kind"].astype(object).to_numpy()
    known = pd.notna(kind) & (kind != UNKNOWN)
    rejected = pd.notna(kind)
    out: dict[str, Any] = {"kinds": list(KINDS), "families": {}}
    for name, mask in families.items():
        rows = mask & known
        lcode, langs = lang_codes(frame)
        block: dict[str, Any] = {
            "runs": sorted(set(frame["run"].astype(str).to_numpy()[mask])),
            "rejections": {
                lang: int((mask & rejected & (lcode == li)).sum()) for li, lang in enumerate(langs)
            },
            "unknown": {
                lang: int((mask & (kind == UNKNOWN) & (lcode == li)).sum())
                for li, lang in enumerate(langs)
            },
        }
        block[SPLIT] = _shares(frame, rs, rows, kind == SPLIT)
        block[TEXT] = _shares(frame, rs, rows, kind == TEXT)
        for flag in FLAGS:
            values = frame[flag].astype(object).to_numpy()
            flagged = pd.notna(values)
            block[flag] = _shares(
                frame, rs, mask & flagged, np.where(flagged, values, False).astype(bool)
            )
        block["split_gap"] = _difference(frame, rs, rows, kind == SPLIT)
        out["families"][name] = block
    return out
