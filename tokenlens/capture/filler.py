"""Filler drafts: slots vLLM verifies that no drafter proposed.

Model Runner V2's n-gram speculator (``NgramGPUSpeculator``, vLLM 0.33+ on GPUs; the
method ``ngram`` runs it under V2) always proposes k tokens. Its finalize kernel takes
the longest n-gram (``prompt_lookup_min`` .. ``prompt_lookup_max``) that ends the
context and occurs earlier, at its rightmost occurrence, and copies the tokens after
it; slots past the end of the context, and every slot when nothing matches, get the
last sampled token (``tl.where(slot_valid, gathered, last_tok)``). vLLM verifies and
counts those fillers like any draft. The V1 n-gram proposer proposes fewer tokens (or
none) instead, so a filler has no V1 counterpart.

:func:`mark_fillers` recomputes the kernel's rule on the CPU from each step's context
(prompt + output before the step), sets the events' ``filler`` column, and checks the
rule against every draft id the capture knows (a valid slot must equal the copied
token, a filler the last token). Any disagreement means the rule no longer describes
this vLLM: the column is left null and the manifest says why. Reconciliation is
untouched (fillers are rows like any other, as vLLM counts them); analysis leaves
filler rows out of the judged-token breakdowns (docs/analysis.md).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NGRAM_GPU_RULE = "ngram_gpu_last_token"


def ngram_gpu_slots(context: Sequence[int], min_n: int, max_n: int, k: int) -> tuple[int, int]:
    """(how many of the k slots come from a match, where the copied tokens start).

    The rule of vLLM's ``_ngram_scan_kernel`` / ``_ngram_finalize_kernel``: among n in
    ``min_n..max_n`` the longest n whose last n context tokens also occur at a position
    ``pos <= len - n - 1``, the rightmost such ``pos``; the drafts are the tokens from
    ``pos + n``, as many as the context holds (at most k). No match: 0 slots.
    """
    ctx = np.asarray(context, dtype=np.int64)
    seq_len = len(ctx)
    if seq_len < min_n or k <= 0:
        return 0, 0
    best: tuple[int, int] | None = None
    for n in range(min_n, max_n + 1):
        if seq_len - n - 1 < 0:
            break
        windows = np.lib.stride_tricks.sliding_window_view(ctx[: seq_len - 1], n)
        hits = np.flatnonzero((windows == ctx[seq_len - n :]).all(axis=1))
        if hits.size:
            best = (n, int(hits[-1]))
    if best is None:
        return 0, 0
    n, pos = best
    start = pos + n
    return min(k, max(seq_len - start, 0)), start


def filler_rule(directory: Path) -> dict[str, Any] | None:
    """The fill rule a recording model runner of this capture reported, if any."""
    for path in sorted(directory.glob("runner-*.json")):
        try:
            status = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(status, dict) and status.get("filler"):
            return dict(status["filler"])
    return None


def _list_column(table: pa.Table, name: str) -> list[list[int]]:
    return [list(x or []) for x in table.column(name).to_pylist()]


def mark_fillers(
    events: pa.Table, requests: pa.Table, rule: dict[str, Any] | None
) -> tuple[pa.Table, dict[str, Any] | None]:
    """``events`` with a ``filler`` column under ``rule`` (a runner status's ``filler``),
    and the manifest's ``capture.filler_drafts``; unchanged and None without a rule."""
    if not rule:
        return events, None
    stats: dict[str, Any] = {
        "rule": rule.get("rule"),
        "count": None,
        "accepted": None,
        "share": None,
        "checked": 0,
        "mismatches": 0,
        "problem": rule.get("problem"),
    }
    if rule.get("rule") != NGRAM_GPU_RULE:
        stats["problem"] = stats["problem"] or f"unknown filler rule {rule.get('rule')!r}"
        return events, stats
    if "prompt_token_ids" not in requests.column_names:
        stats["problem"] = "requests.parquet has no prompt_token_ids"
        return events, stats
    min_n, max_n, k = int(rule["min_n"]), int(rule["max_n"]), int(rule["k"])
    prompts = dict(
        zip(
            requests.column("request_id").to_pylist(),
            _list_column(requests, "prompt_token_ids"),
            strict=True,
        )
    )
    outputs = dict(
        zip(
            requests.column("request_id").to_pylist(),
            _list_column(requests, "output_token_ids"),
            strict=True,
        )
    )
    rid = events.column("request_id").to_pylist()
    step = events.column("step").to_pylist()
    pos = events.column("position").to_pylist()
    out_idx = events.column("output_index").to_pylist()
    draft = events.column("draft_token_id").to_pylist()
    # b of each step: the output index of its position-0 row (the step's first token).
    base = {(r, s): o for r, s, p, o in zip(rid, step, pos, out_idx, strict=True) if p == 0}
    slots: dict[tuple[str, int], tuple[int, int, list[int]] | None] = {}
    filler: list[bool | None] = []
    for r, s, p, d in zip(rid, step, pos, draft, strict=True):
        key = (r, s)
        if key not in slots:
            b = base.get(key)
            prompt = prompts.get(r)
            if b is None or prompt is None:
                slots[key] = None
            else:
                context = [*prompt, *outputs.get(r, [])[:b]]
                valid, start = ngram_gpu_slots(context, min_n, max_n, k)
                slots[key] = (valid, start, context)
        info = slots[key]
        if info is None:
            filler.append(None)
            continue
        valid, start, context = info
        is_filler = p >= valid
        filler.append(is_filler)
        if d >= 0:
            expected = context[-1] if is_filler else context[start + p]
            stats["checked"] += 1
            if d != expected:
                stats["mismatches"] += 1
    return _with_fillers(events, filler, stats)


def _with_fillers(
    events: pa.Table, filler: list[bool | None], stats: dict[str, Any]
) -> tuple[pa.Table, dict[str, Any]]:
    column = pa.array(filler, pa.bool_())
    if stats["mismatches"]:
        stats["problem"] = (
            f"{stats['mismatches']} of {stats['checked']} known draft ids contradict the "
            "V2 n-gram fill rule: filler left unknown"
        )
        column = pa.nulls(len(filler), pa.bool_())
    else:
        stats["count"] = int(pc.sum(column).as_py() or 0)
        accepted = pc.and_(column, events.column("accepted"))
        stats["accepted"] = int(pc.sum(accepted).as_py() or 0)
        stats["share"] = stats["count"] / events.num_rows if events.num_rows else None
    if "filler" in events.column_names:
        events = events.drop_columns(["filler"])
    return events.append_column(pa.field("filler", pa.bool_()), column), stats
