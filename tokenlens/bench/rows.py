"""A measured case as numbers: its repeats (:class:`Repeat`), its results row
(:func:`case_row`) and the speedups over the baseline of the same model, corpus, length
and language (:func:`with_speedups`). Pure functions of what was measured, apart from
the engine: the tests build rows from made-up repeats.
"""

from __future__ import annotations

import os
import socket
import statistics
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokenlens.bench.plan import BASELINE, Case, Plan
from tokenlens.bench_results import Row, setup_label
from tokenlens.engine.results import GeneratedRequest, SpecCounters
from tokenlens.format import num


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
    engine: Mapping[str, Any] | None = None,
    steps: Mapping[str, Any] | None = None,
    session: str | None = None,
) -> Row:
    """The results row of a measured case (speedups are filled in by :func:`with_speedups`).

    ``engine``: the engine facts vLLM resolved (:mod:`tokenlens.engine.facts`), whose
    model runner and async scheduling decide which baseline is like for like;
    ``steps``: the step split (:func:`tokenlens.bench.steps.step_split`).
    """
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
        "concurrency": case.concurrency,
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
        "model_runner": (engine or {}).get("model_runner"),
        "async_scheduling": (engine or {}).get("async_scheduling"),
        **{key: (steps or {}).get(key) for key in STEP_COLUMNS},
        "session": session,
    }


def plain_result(
    repeats: Sequence[Repeat], engine: Mapping[str, Any] | None, session: str | None = None
) -> dict[str, Any]:
    """A case measured again without the plugin (``plain.json``): its tok/s, how the
    engine ran, and the bench invocation that measured it (``session``)."""
    tok_s = [r.tokens / r.wall_s for r in repeats]
    return {
        "tok_s": statistics.median(tok_s),
        "tok_s_min": min(tok_s),
        "tok_s_max": max(tok_s),
        "repeats": [{"wall_seconds": r.wall_s, "output_tokens": r.tokens} for r in repeats],
        "counters": sum((r.counters for r in repeats), SpecCounters()).to_json(),
        "model_runner": (engine or {}).get("model_runner"),
        "async_scheduling": (engine or {}).get("async_scheduling"),
        "plugins": "none (VLLM_PLUGINS='')",
        "session": session,
    }


def with_plain(row: Row, plain: Mapping[str, Any] | None) -> Row:
    """``row`` with its plain (untraced) tok/s beside the traced one, if measured."""
    if plain is None:
        return row
    out = {**row, **{f"plain_{k}": plain.get(k) for k in ("tok_s", "tok_s_min", "tok_s_max")}}
    base = plain.get("tok_s")
    out["traced_over_plain"] = row["tok_s"] / base if base and row.get("tok_s") else None
    out["plain_same_session"] = not sessions_differ(row, plain)
    return out


def measuring_session(started_at: str) -> str:
    """The identity of one bench invocation, recorded in each row it measures:
    ``host/pid/random@start time``. Two rows with different sessions were measured by
    different invocations (a resumed bench), possibly on another host or day."""
    return f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}@{started_at}"


def sessions_differ(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two measurements come from different bench invocations. Rows written
    before sessions were recorded have none: two such rows count as one session (a
    bench of that era cannot tell), one with and one without as two (the newer row was
    measured by a later invocation that resumed the older bench)."""
    return a.get("session") != b.get("session")


UNRECORDED_SETUP = "model runner and async scheduling not recorded: like for like not checked"
# The caveat on a speed-up or a traced/plain ratio whose two sides come from different
# bench invocations (rows.sessions_differ).
OTHER_SESSION = (
    "measured in another bench invocation than its baseline (a resumed bench): host and "
    "load may differ, so the ratio is not like for like; --restart measures all cases in one"
)


# The step split's columns, as :func:`tokenlens.bench.steps.step_split` names them.
STEP_COLUMNS = ("step_ms", "draft_ms", "verify_ms", "step_timing", "timed_steps", "timer_us")


def _setup(row: Mapping[str, Any]) -> tuple[Any, Any]:
    return (row.get("model_runner"), row.get("async_scheduling"))


def like_for_like(row: Row, baselines: Sequence[Row]) -> tuple[Row | None, str | None]:
    """The baseline ``row``'s speed-up divides by, and a note (why none, or a caveat).

    Only a baseline that ran on the same model runner and async scheduling as the case
    counts: a speed-up across runners would credit speculative decoding with (or blame
    it for) the runner's own speed. The first such baseline in plan order wins.
    """
    if row["method"] == BASELINE:
        return row, None
    same = [b for b in baselines if _setup(b) == _setup(row)]
    if same:
        in_session = [b for b in same if not sessions_differ(b, row)]
        base = (in_session or same)[0]
        notes = []
        if _setup(row) == (None, None):
            notes.append(UNRECORDED_SETUP)
        if sessions_differ(base, row):
            notes.append(OTHER_SESSION)
        return base, "; ".join(notes) or None
    if not baselines:
        return None, "no baseline (method none) of this model, corpus, length and language"
    others = ", ".join(f"{b['method_label']} ({setup_label(b)})" for b in baselines)
    return None, (
        f"no baseline ran on {setup_label(row)} (baselines: {others}); add one with the "
        "case's runner and async setting ([[method]] engine/env)"
    )


def with_speedups(rows: Sequence[Row]) -> list[Row]:
    """Rows with speedup over the like-for-like baseline (:func:`like_for_like`) of the
    same model, corpus, length, language and concurrency, the drafter's cost measured
    against that baseline's step, and a warning for each case slower than it."""

    def key(row: Row) -> tuple[Any, ...]:
        return (row["model"], row["corpus"], row["length"], row["lang"], row.get("concurrency"))

    baselines: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        if r["method"] == BASELINE:
            baselines.setdefault(key(r), []).append(r)
    out = []
    for row in rows:
        base, note = like_for_like(row, baselines.get(key(row), []))
        row = dict(row)
        row["baseline_case_id"] = base["case_id"] if base is not None else None
        row["speedup_note"] = note
        for col in ("tok_s", "chars_s"):
            ok = base is not None and base[col] and row[col] is not None
            row[f"speedup_{col}"] = row[col] / base[col] if ok and base is not None else None
        row.update(cost_model(row, base))
        row["warning"] = slowdown_warning(row, base)
        out.append(row)
    return out


def cost_model(row: Row, base: Row | None) -> dict[str, float | None]:
    """The drafter's cost against a target step: the like-for-like baseline's median
    step time; ``draft_target_steps`` = drafting time / that step, ``draft_cost`` (c)
    = the same per drafted token (Leviathan et al.'s c). None where not measured."""
    target = base.get("step_ms") if base is not None else None
    draft, k = row.get("draft_ms"), row.get("k") or 0
    steps = draft / target if draft is not None and target else None
    return {
        "baseline_step_ms": target,
        "draft_target_steps": steps,
        "draft_cost": steps / k if steps is not None and k and row["method"] != BASELINE else None,
    }


def slowdown_warning(row: Row, base: Row | None) -> str | None:
    """One line when a speculative case is slower than its like-for-like baseline,
    naming the part of the step that costs (None: not slower, or no such baseline)."""
    speedup = row.get("speedup_tok_s")
    if row["method"] == BASELINE or base is None or speedup is None or speedup >= 1.0:
        return None
    head = (
        f"{row['method_label']} k={row['k']} ({setup_label(row)}) runs at "
        f"{num(speedup, 'speedup')}x the tok/s of {base['method_label']}"
    )
    step, draft, verify = row.get("step_ms"), row.get("draft_ms"), row.get("verify_ms")
    if step is None or draft is None or verify is None:
        why = row.get("step_timing") or "no step times were recorded"
        return f"{head}; the step split is unavailable: {why}"
    target = row.get("baseline_step_ms")
    per_step = row.get("mean_acceptance_length")
    yields = f", and a step yields {num(per_step, 'per_step')} tokens" if per_step else ""
    if not target:
        return (
            f"{head}: drafting takes {_ms(draft)} of a {_ms(step)} step (verification "
            f"{_ms(verify)}); the baseline's step time is unknown{yields}"
        )
    if draft >= verify - target:
        return (
            f"{head}: drafting takes {_ms(draft)} of a {_ms(step)} step: the drafter costs "
            f"{draft / target:.1f} target steps of {_ms(target)}{yields}"
        )
    return (
        f"{head}: verification takes {_ms(verify)} of a {_ms(step)} step, "
        f"{verify / target:.1f} target steps of {_ms(target)} (drafting {_ms(draft)}){yields}"
    )


def _ms(value: float) -> str:
    return f"{value:.2f} ms" if value < 10 else f"{value:.1f} ms"
