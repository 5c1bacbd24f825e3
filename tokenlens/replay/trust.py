"""When a replay may stand in for a trace: exact in float32, approximate otherwise.

The replay's drafter argmax comes from a teacher-forced prefill; vLLM's proposer
computes it in its decode path. In float32 the two agree to the last bits that matter
(every row of docs/replay.md's agreement runs); in bfloat16 (vLLM's default on GPUs and
on the CPU) they do not: a draft-model k=3 replay of 12 held-out prompts differed from
its trace in 6 requests (acceptance 0.539 vs 0.564 in English). So:

- every replayed run records its dtype and whether it is exact (``replay.exact``,
  ``replay.approximate``: why not);
- an approximate replay is vouched for only by a real trace of the same method, k and
  dtype whose per-language acceptance (vLLM's definition: accepted / drafted tokens)
  it matches within :data:`BOUND` (:func:`agreement`); the study writes the check into
  the replayed runs' manifests (``replay_check``);
- the analysis gives no verdict on a study that reads an approximate replay without an
  agreeing check (:func:`unvouched`).

:data:`BOUND` is 0.5 percentage points per language: the Japanese - English gap of a
vouched replay then differs from the trace's by at most 1 point, half the verdict
margin (``Rules.delta``, 2 points).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tokenlens.prompts import normalise_lang
from tokenlens.rundir import MANIFEST, Run, read_run, write_json_atomic

EXACT_DTYPES = frozenset({"float32"})
BOUND = 0.005
APPROXIMATE_REASON = (
    "replayed in {dtype}: the drafter's argmax from a teacher-forced prefill can differ "
    "from vLLM's decode path where its top two logits nearly tie (exact only in float32)"
)


def exactness(dtype: str) -> dict[str, Any]:
    """The manifest's ``replay.exact`` / ``replay.approximate`` for a replay in ``dtype``."""
    name = str(dtype).removeprefix("torch.")
    exact = name in EXACT_DTYPES
    return {
        "exact": exact,
        "approximate": None if exact else APPROXIMATE_REASON.format(dtype=name),
    }


def acceptance_by_lang(run: Run) -> dict[str, float | None]:
    """Accepted / drafted tokens per language, from the run's events."""
    if run.events is None or run.events.num_rows == 0:
        return {}
    langs = dict(
        zip(
            run.requests.column("request_id").to_pylist(),
            [normalise_lang(x) for x in run.requests.column("lang").to_pylist()],
            strict=True,
        )
    )
    lang = pa.array([langs.get(r) for r in run.events.column("request_id").to_pylist()])
    out: dict[str, float | None] = {}
    for value in sorted({x for x in langs.values() if x}):
        mask = pc.equal(lang, value)
        rows = int(pc.sum(mask).as_py() or 0)
        accepted = int(pc.sum(pc.and_(mask, run.events.column("accepted"))).as_py() or 0)
        out[value] = accepted / rows if rows else None
    return out


def agreement(traced: Run, replayed: Run, bound: float = BOUND) -> dict[str, Any]:
    """Whether ``replayed`` reproduces ``traced`` (same method, k, dtype) within ``bound``."""
    t_dtype = str(traced.manifest.get("dtype") or "").removeprefix("torch.")
    r_dtype = str((replayed.manifest.get("replay") or {}).get("dtype") or "").removeprefix("torch.")
    a, b = acceptance_by_lang(traced), acceptance_by_lang(replayed)
    diffs: dict[str, float | None] = {}
    for lang in sorted(set(a) | set(b)):
        x, y = a.get(lang), b.get(lang)
        diffs[lang] = y - x if x is not None and y is not None else None
    known = [abs(d) for d in diffs.values() if d is not None]
    worst = max(known) if known else None
    same_dtype = bool(t_dtype) and t_dtype == r_dtype
    complete = worst is not None and len(known) == len(diffs)
    return {
        "trace": traced.path.name,
        "trace_dtype": t_dtype or None,
        "replay_dtype": r_dtype or None,
        "acceptance_traced": a,
        "acceptance_replayed": b,
        "difference": diffs,
        "max_abs_difference": worst,
        "bound": bound,
        "agrees": bool(same_dtype and complete and worst is not None and worst <= bound),
    }


def unvouched(manifest: Mapping[str, Any]) -> str | None:
    """Why an analysis must not draw verdicts from this run, or None.

    Traced runs and exact replays: None. An approximate replay: None only with a
    ``replay_check`` that agrees (:func:`agreement`).
    """
    replay = manifest.get("replay")
    if not isinstance(replay, Mapping) or replay.get("exact", True) is not False:
        return None
    check = manifest.get("replay_check")
    if isinstance(check, Mapping) and check.get("agrees") is True:
        return None
    why = str(replay.get("approximate") or "an approximate replay")
    if isinstance(check, Mapping):
        worst = check.get("max_abs_difference")
        return (
            f"{why}; its check trace ({check.get('trace')}) differs by "
            f"{'unknown' if worst is None else f'{100 * worst:.2f} pp'} in acceptance "
            f"(bound {100 * float(check.get('bound', BOUND)):.2f} pp)"
        )
    return f"{why}; no check trace at the same dtype vouches for it"


def vouch(replayed: Sequence[Path], traces: Sequence[Path]) -> dict[str, dict[str, Any]]:
    """Check each replayed method against the real traces of the same cell and record it.

    A trace named like a replayed cell (``<method>-k<k>``) is that cell's check; a
    method's checks (the worst one) go into the manifest of every replayed run of the
    method (``replay_check``): the replay of all k comes from the same drafter passes.
    Returns method -> the recorded check.
    """
    by_name = {p.name: p for p in replayed}
    found: dict[str, list[dict[str, Any]]] = {}
    for trace in traces:
        if trace.name in by_name:
            run = read_run(by_name[trace.name])
            method = str(run.manifest["speculative"].get("method"))
            found.setdefault(method, []).append(agreement(read_run(trace), run))
    chosen = {
        method: min(
            checks,
            key=lambda c: (c["agrees"], -(c["max_abs_difference"] or math.inf)),
        )
        for method, checks in found.items()
    }
    for path in replayed:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        method = str(manifest["speculative"].get("method"))
        if method in chosen:
            manifest["replay_check"] = chosen[method]
            write_json_atomic(path / MANIFEST, manifest)
    return chosen
