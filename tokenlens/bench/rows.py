"""A measured case as numbers: its repeats (:class:`Repeat`), its results row
(:func:`case_row`) and the speedups over the baseline of the same model, corpus, length
and language (:func:`with_speedups`). Pure functions of what was measured, apart from
the engine: the tests build rows from made-up repeats.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokenlens.bench.plan import BASELINE, Case, Plan
from tokenlens.bench_results import Row
from tokenlens.engine.results import GeneratedRequest, SpecCounters


@dataclass(frozen=True)
class Repeat:
    """One measured repeat of a case."""

    wall_s: float
    tokens: int
    chars: int
    bytes: int
    ttft: list[float]
    counters: SpecCounters
    # The sum of vLLM's per-request spec-decode figures, where a server reports them.
    reported: SpecCounters | None = None
    # vLLM's prefix-cache counters over the repeat (prompt tokens looked up, found);
    # None where the backend does not report them (a server).
    prefix_cache: dict[str, int] | None = None

    @classmethod
    def of(
        cls,
        requests: Sequence[GeneratedRequest],
        wall: float,
        counters: SpecCounters,
        info: dict[str, Any] | None = None,
    ) -> Repeat:
        info = info or {}
        keys = ("prefix_cache_queries", "prefix_cache_hits")
        prefix = (
            {k.removeprefix("prefix_cache_"): int(info[k]) for k in keys}
            if all(k in info for k in keys)
            else None
        )
        return cls(
            wall_s=wall,
            tokens=sum(len(r.output_token_ids) for r in requests),
            chars=sum(len(r.output_text) for r in requests),
            bytes=sum(len(r.output_text.encode("utf-8")) for r in requests),
            ttft=[r.first_token_latency for r in requests if r.first_token_latency is not None],
            counters=counters,
            reported=_reported(requests),
            prefix_cache=prefix,
        )


def _reported(requests: Sequence[GeneratedRequest]) -> SpecCounters | None:
    """Per-request figures summed, if every request carried them."""
    if not requests or any(r.spec_decode is None for r in requests):
        return None
    return sum(
        (SpecCounters.from_request_metrics(r.spec_decode or {}) for r in requests),
        SpecCounters(),
    )


def prefix_cache_note(repeats: Sequence[Repeat]) -> dict[str, Any]:
    """Whether the measured repeats hit vLLM's prefix cache (the manifest's
    ``bench.prefix_cache``): prompt tokens looked up and found cached, summed."""
    counted = [r.prefix_cache for r in repeats if r.prefix_cache is not None]
    if len(counted) != len(repeats) or not repeats:
        return {"hit": None, "why": "the backend does not report vLLM's prefix-cache counters"}
    queries = sum(c["queries"] for c in counted)
    hits = sum(c["hits"] for c in counted)
    return {"hit": hits > 0, "queried_tokens": queries, "hit_tokens": hits}


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def case_row(
    case: Case,
    plan: Plan,
    repeats: Sequence[Repeat],
    run_dir: str,
    signature: str,
    dtype: str | None,
) -> Row:
    """The results row of a measured case (speedups are filled in by :func:`with_speedups`)."""
    tok_s = [r.tokens / r.wall_s for r in repeats]
    chars_s = [r.chars / r.wall_s for r in repeats]
    bytes_s = [r.bytes / r.wall_s for r in repeats]
    total = sum((r.counters for r in repeats), SpecCounters())
    baseline = case.method.method == BASELINE
    per_pos = (
        [a / total.num_drafts for a in total.accepted_per_position] if total.num_drafts else []
    )
    mean = statistics.fmean(tok_s)
    return {
        "case_id": case.case_id,
        "model": case.model.name,
        "model_path": case.model.path,
        "dtype": (dtype or case.model.dtype).removeprefix("torch."),
        "quantization": case.model.quantization,
        "method_label": case.method.name,
        "method": case.method.method,
        "k": 0 if baseline else case.k,
        "draft_model": case.method.draft_model,
        "corpus": case.corpus.name,
        "length": case.length,
        "lang": case.lang,
        "prompts": len(case.prompts),
        "warmup": plan.warmup,
        "repeats": len(repeats),
        "concurrency": plan.concurrency,
        "output_tokens": int(statistics.median(r.tokens for r in repeats)),
        "output_chars": int(statistics.median(r.chars for r in repeats)),
        "output_bytes": int(statistics.median(r.bytes for r in repeats)),
        "tok_s": statistics.median(tok_s),
        "tok_s_min": min(tok_s),
        "tok_s_max": max(tok_s),
        "tok_s_cv": statistics.pstdev(tok_s) / mean if mean else None,
        "chars_s": statistics.median(chars_s),
        "chars_s_min": min(chars_s),
        "chars_s_max": max(chars_s),
        "bytes_s": statistics.median(bytes_s),
        "bytes_s_min": min(bytes_s),
        "bytes_s_max": max(bytes_s),
        "ttft_s": _median([t for r in repeats for t in r.ttft]),
        "wall_s": statistics.median(r.wall_s for r in repeats),
        "num_drafts": total.num_drafts,
        "num_draft_tokens": total.num_draft_tokens,
        "num_accepted_tokens": total.num_accepted_tokens,
        "acceptance_rate": None if baseline else total.acceptance_rate,
        "mean_acceptance_length": None if baseline else total.mean_acceptance_length,
        "acceptance_per_position": None if baseline else per_pos,
        "run_dir": run_dir,
        "signature": signature,
    }


def with_speedups(rows: Sequence[Row]) -> list[Row]:
    """Rows with speedup over the baseline of the same model, corpus, length and language."""

    def key(row: Row) -> tuple[Any, ...]:
        return (row["model"], row["corpus"], row["length"], row["lang"])

    baselines = {key(r): r for r in rows if r["method"] == BASELINE}
    out = []
    for row in rows:
        base = baselines.get(key(row))
        row = dict(row)
        row["baseline_case_id"] = base["case_id"] if base is not None else None
        for col in ("tok_s", "chars_s"):
            ok = base is not None and base[col] and row[col] is not None
            row[f"speedup_{col}"] = row[col] / base[col] if ok and base is not None else None
        out.append(row)
    return out
