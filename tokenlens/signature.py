"""Reproducibility signatures, in the spirit of sacrebleu's.

Every run, table and report carries one line that names everything its numbers
depend on: tool versions, model and drafter, method and k, sampling, corpus hash,
seed. Two results are comparable only if their signatures say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Fixed order so that equal settings always give equal strings.
FIELDS = (
    "tokenlens",
    "vllm",
    "model",
    "draft",
    "method",
    "k",
    "tokenizer",
    "dict",
    "sampling",
    "corpus",
    "seed",
    "bootstrap",
)


def _fmt(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value).replace("|", "/").replace(" ", "_")


def make_signature(fields: Mapping[str, Any]) -> str:
    """``key:value|key:value`` in the canonical order; unknown keys follow, sorted."""
    keys = [k for k in FIELDS if k in fields] + sorted(set(fields) - set(FIELDS))
    return "|".join(f"{k}:{_fmt(fields[k])}" for k in keys)


def parse_signature(signature: str) -> dict[str, str]:
    """The fields of a signature string (values as strings)."""
    out: dict[str, str] = {}
    for part in signature.split("|"):
        key, sep, value = part.partition(":")
        if sep:
            out[key] = value
    return out


def sampling_label(temperature: float, top_p: float, top_k: int, max_tokens: int) -> str:
    """A short name for a sampling setup: ``greedy`` or ``t0.7,p0.9,k20``, plus length."""
    base = "greedy" if temperature == 0 else f"t{temperature:g},p{top_p:g},k{top_k}"
    return f"{base},max{max_tokens}"
