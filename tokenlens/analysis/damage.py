"""Damage named where it is found: confidences that are not numbers, and prompts whose
script contradicts their language label.

- :func:`exclude_nonfinite`: a NaN or infinite logprob (the token's own, or one of its
  top-k) would turn the token's confidence into NaN and drop it from the confidence
  tables without a word. Such a token's confidence is excluded instead (its logprob
  becomes null, its top-k empty, so it has no confidence at all), and how many tokens
  of how many requests were excluded goes into ``summary.json`` → ``inputs`` and a
  warning.
- :func:`label_contradictions`: a prompt labelled ``en`` written and answered in
  Japanese (or one labelled ``ja`` without a single Japanese character in prompt and
  output) would be counted under the wrong language. Its prompt ids are named in a
  warning; ``--strict`` refuses the run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenlens.errors import TokenlensError
from tokenlens.rundir import Run


def _finite(column: pa.ChunkedArray, depth: int, nulls_allowed: bool) -> bool:
    """Every value of a nested list column is a finite number (nulls: as allowed)."""
    values: Any = column.combine_chunks()
    for _ in range(depth):
        values = pc.list_flatten(values)
    if values.null_count and not nulls_allowed:
        return False
    return bool(pc.all(pc.is_finite(values.drop_null())).as_py() is not False)


def exclude_nonfinite(run: Run) -> tuple[Run, dict[str, int] | None]:
    """``run`` with the confidence of every token that has a non-finite logprob removed,
    and ``{"requests": n, "tokens": m}`` (None when every logprob is finite)."""
    req = run.requests
    if _finite(req.column("token_logprob"), 1, True) and _finite(
        req.column("top_logprobs"), 2, False
    ):
        return run, None
    logprobs = req.column("token_logprob").to_pylist()
    top_ids = req.column("top_ids").to_pylist()
    top_lps = req.column("top_logprobs").to_pylist()
    tokens = requests = 0
    for i, values in enumerate(logprobs):
        hit = False
        for t in range(len(values or ())):
            tops = (top_lps[i] or [])[t] if top_lps[i] and t < len(top_lps[i]) else None
            bad_own = values[t] is not None and not np.isfinite(values[t])
            bad_top = any(x is None or not np.isfinite(x) for x in tops or ())
            if bad_own or bad_top:
                values[t] = None
                if top_lps[i] is not None and t < len(top_lps[i]):
                    top_lps[i][t] = []
                if top_ids[i] is not None and t < len(top_ids[i]):
                    top_ids[i][t] = []
                tokens += 1
                hit = True
        requests += hit
    if not tokens:
        return run, None
    schema = req.schema
    for name, column in (
        ("token_logprob", logprobs),
        ("top_ids", top_ids),
        ("top_logprobs", top_lps),
    ):
        index = schema.get_field_index(name)
        req = req.set_column(index, schema.field(index), pa.array(column, schema.field(name).type))
    return replace(run, requests=req), {"requests": requests, "tokens": tokens}


# -- language labels ------------------------------------------------------------------


def _japanese(ch: str) -> bool:
    """Hiragana, katakana (full and half width) or a CJK ideograph."""
    code = ord(ch)
    return (
        0x3040 <= code <= 0x30FF
        or 0xFF66 <= code <= 0xFF9D
        or 0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
    )


def contradicts(lang: str | None, text: str) -> bool:
    """True when ``text``'s script contradicts ``lang``: labelled Japanese without one
    Japanese character (but with Latin letters), or labelled English with more Japanese
    characters than Latin letters. Other labels are not judged."""
    base = (lang or "").lower().split("-")[0]
    if base not in ("ja", "en"):
        return False
    japanese = sum(_japanese(c) for c in text)
    latin = sum(c.isascii() and c.isalpha() for c in text)
    if base == "ja":
        return japanese == 0 and latin > 0
    return japanese > latin


def user_text(vocab: Any, prompt_ids: list[int]) -> str:
    """What a request's prompt says: its user message (between the special tokens of a
    chat template, the part that starts with ``user``), else the whole decoded prompt."""
    special = vocab.is_special(prompt_ids)
    parts: list[list[int]] = [[]]
    for token, is_special in zip(prompt_ids, special, strict=True):
        if is_special:
            parts.append([])
        else:
            parts[-1].append(int(token))
    texts = [b"".join(vocab.pieces(p)).decode("utf-8", "replace") for p in parts if p]
    users = [t[len("user") :] for t in texts if t.startswith("user\n")]
    return users[-1] if users else "".join(texts)


def label_contradictions(run: Run, vocab: Any) -> list[str]:
    """Prompt ids of ``run`` whose script contradicts their ``lang`` label: in the output
    (what the analysis counts under the label) and in the prompt's user message. Both
    must contradict it: a translation prompt labelled with its target language quotes a
    source text in the other script, and a Japanese request may be answered with code
    alone. Requests without recorded prompt token ids (runs written before them, the
    simulator's) are not judged: their output alone is too weak a witness."""
    req = run.requests
    rows = zip(
        req.column("prompt_id").to_pylist(),
        req.column("lang").to_pylist(),
        req.column("prompt_token_ids").to_pylist(),
        req.column("output_text").to_pylist(),
        strict=True,
    )
    return sorted(
        {
            str(pid)
            for pid, lang, ids, text in rows
            if ids and contradicts(lang, text or "") and contradicts(lang, user_text(vocab, ids))
        }
    )


def damage_report(
    found: list[tuple[Path, tuple[str, ...], dict[str, int] | None]], strict: bool
) -> tuple[list[str], dict[str, Any]]:
    """Every run's damage, from ``(path, contradicted prompt ids, non-finite counts)``
    per run (:func:`label_contradictions`, :func:`exclude_nonfinite`): one warning line
    per finding and ``summary.json`` → ``inputs`` fields. ``strict``: a prompt whose
    script contradicts its label is refused (one line) instead of warned about."""
    warnings = []
    excluded: list[dict[str, Any]] = []
    contradicted: list[dict[str, Any]] = []
    for path, ids, counts in found:
        if ids:
            shown = ", ".join(repr(i) for i in ids[:5]) + (" ..." if len(ids) > 5 else "")
            line = (
                f"{path}: {len(ids)} prompts are written in a script that contradicts "
                f"their language label ({shown}): they would be counted under the wrong "
                "language"
            )
            if strict:
                raise TokenlensError(f"{line}; fix their lang, or leave out --strict")
            warnings.append(line)
            contradicted.append({"run": str(path), "prompt_ids": list(ids)})
        if counts is not None:
            warnings.append(
                f"{path}: {counts['tokens']} tokens of {counts['requests']} requests have "
                "non-finite logprobs (NaN or inf): their confidence is excluded"
            )
            excluded.append({"run": str(path), **counts})
    return warnings, {"nonfinite_confidence": excluded, "label_contradictions": contradicted}
