"""One run's own checks before analyze reads it: its manifest fields have the right
types, its events fit its requests (no nulls where the contract has none, positions
within k, accepted drafts a prefix of each step, output indices inside the output),
and whether it is partial or unreconciled (refused, or a warning when allowed).
Called by :func:`tokenlens.analysis.inputs.validate_inputs`, which checks what
concerns several runs and the output directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tokenlens.capture.reconcile import reconcile
from tokenlens.errors import TokenlensError
from tokenlens.rundir import (
    Run,
    continue_hint,
)


def check_manifest(run: Run) -> None:
    m = run.manifest
    where = run.path / "manifest.json"
    for key in ("signature", "tokenizer"):
        if not isinstance(m[key], str) or not m[key]:
            raise TokenlensError(f"{where}: '{key}' must be a non-empty string")
    spec = m["speculative"]
    if not isinstance(spec, dict):
        raise TokenlensError(f"{where}: 'speculative' must be an object")
    if not isinstance(spec.get("method", ""), str):
        raise TokenlensError(f"{where}: 'speculative.method' must be a string")
    k = spec.get("num_speculative_tokens")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
        raise TokenlensError(f"{where}: 'speculative.num_speculative_tokens' must be an integer")
    reconciliation = m.get("reconciliation")
    if reconciliation is not None and not isinstance(reconciliation, dict):
        raise TokenlensError(f"{where}: 'reconciliation' must be an object")


def _nulls(table: pa.Table, column: str) -> int:
    return int(table.column(column).null_count)


def check_events(run: Run) -> None:
    """Events that fit their requests, as the contract defines them."""
    if run.events is None:
        raise TokenlensError(
            f"{run.path}: no events.parquet (trace the run with capture to analyse it)"
        )
    where = run.path / "events.parquet"
    req, ev = run.requests, run.events
    rids = req.column("request_id")
    if rids.null_count:
        raise TokenlensError(f"{run.path / 'requests.parquet'}: a request_id is null")
    if pc.count_distinct(rids).as_py() != req.num_rows:
        raise TokenlensError(f"{run.path / 'requests.parquet'}: a request_id is repeated")
    for column in ("request_id", "step", "position", "draft_token_id", "accepted"):
        if _nulls(ev, column):
            raise TokenlensError(f"{where}: column '{column}' has nulls")
    if ev.num_rows == 0:
        return
    known = pc.is_in(ev.column("request_id"), value_set=rids.combine_chunks())
    if not pc.all(known).as_py():
        bad = ev.column("request_id").filter(pc.invert(known))[0].as_py()
        raise TokenlensError(f"{where}: names request {bad!r}, which requests.parquet lacks")
    step = ev.column("step").to_numpy()
    position = ev.column("position").to_numpy()
    if (step < 0).any() or (position < 0).any():
        raise TokenlensError(f"{where}: a step or position is negative")
    k = run.k
    if k and (position >= k).any():
        raise TokenlensError(
            f"{where}: draft position {int(position.max())} but the run drafts k={k} tokens"
        )
    for column in ("emitted_token_id", "output_index"):
        values = ev.column(column).drop_null().to_numpy()
        if (values < 0).any():
            raise TokenlensError(f"{where}: column '{column}' has a negative value")
    _check_steps(where, ev)
    _check_accepted(where, ev)
    _check_output_index(run, where)


def _check_steps(where: Path, ev: pa.Table) -> None:
    """Each (request, step, position) once, and accepted drafts a prefix of their step."""
    order = pc.sort_indices(
        ev,
        sort_keys=[("request_id", "ascending"), ("step", "ascending"), ("position", "ascending")],
    )
    t = ev.take(order)
    rid = pc.dictionary_encode(t.column("request_id")).combine_chunks().indices.to_numpy()
    step = t.column("step").to_numpy()
    pos = t.column("position").to_numpy()
    acc = t.column("accepted").to_numpy(zero_copy_only=False).astype(bool)
    same = (rid[1:] == rid[:-1]) & (step[1:] == step[:-1])
    if (same & (pos[1:] == pos[:-1])).any():
        raise TokenlensError(f"{where}: a (request_id, step, position) appears twice")
    if (same & acc[1:] & ~acc[:-1]).any():
        raise TokenlensError(f"{where}: a draft is accepted after a rejected one in its step")
    first = np.concatenate(([True], ~same))
    if (pos[first] != 0).any():
        raise TokenlensError(f"{where}: a step does not start at draft position 0")


def _check_output_index(run: Run, where: Path) -> None:
    """Output indices inside the output, pointing at the token the event says came out."""
    assert run.events is not None
    ev = run.events.filter(pc.is_valid(run.events.column("output_index")))
    if ev.num_rows == 0:
        return
    ids = run.requests.column("output_token_ids").combine_chunks()
    lengths = pc.list_value_length(ids).fill_null(0).to_numpy(zero_copy_only=False)
    starts = np.concatenate(([0], np.cumsum(lengths)))[:-1]
    index = pc.index_in(ev.column("request_id"), value_set=run.requests.column("request_id"))
    row = index.to_numpy(zero_copy_only=False)
    at = ev.column("output_index").to_numpy()
    if (at >= lengths[row]).any():
        raise TokenlensError(f"{where}: an output_index lies beyond its request's output")
    if ev.column("emitted_token_id").null_count:
        raise TokenlensError(f"{where}: an event has an output_index but no emitted_token_id")
    flat = pc.list_flatten(ids).to_numpy(zero_copy_only=False)
    if (flat[starts[row] + at] != ev.column("emitted_token_id").to_numpy()).any():
        raise TokenlensError(
            f"{where}: an emitted_token_id differs from its request's output at its output_index"
        )
    _one_step_per_output_index(where, ev, row, at)


def _one_step_per_output_index(where: Path, ev: pa.Table, row: Any, at: Any) -> None:
    """Each output token comes out of one verification step: an output index that two
    steps claim (events duplicated under shifted step numbers) would count it twice."""
    key = row.astype(np.int64) * (int(at.max()) + 1) + at
    order = np.argsort(key, kind="stable")
    twice = np.flatnonzero(key[order][1:] == key[order][:-1])
    if not len(twice):
        return
    first, second = order[twice[0]], order[twice[0] + 1]
    steps = ev.column("step").to_numpy()
    raise TokenlensError(
        f"{where}: output index {int(at[first])} of request "
        f"{ev.column('request_id')[int(first)].as_py()!r} appears in two verification steps "
        f"({int(steps[first])} and {int(steps[second])}): each output token comes out of "
        "exactly one step, so these events would count it twice"
    )


def _check_accepted(where: Path, ev: pa.Table) -> None:
    """An accepted draft came out as itself (unless vLLM only showed a -1 placeholder)."""
    acc = ev.column("accepted").to_numpy(zero_copy_only=False).astype(bool)
    emitted = ev.column("emitted_token_id")
    if (acc & ~pc.is_valid(emitted).to_numpy(zero_copy_only=False)).any():
        raise TokenlensError(f"{where}: an accepted draft has no emitted_token_id")
    draft = ev.column("draft_token_id").to_numpy()
    out = emitted.fill_null(-1).to_numpy()
    if (acc & (draft >= 0) & (draft != out)).any():
        raise TokenlensError(f"{where}: an accepted draft differs from the token that came out")


CUT_GAP = ": vLLM's output differs from the step files"
"""The capture gap salvage records for a request whose step file stops short of its output."""


def cut_requests(manifest: dict[str, Any]) -> list[str]:
    """Requests whose events stop short of their output (a step file cut by a crash).

    A salvaged partial run lists them (``salvage.events_cut``, or its capture gaps
    before that field); a run completed by a resume of an older tokenlens kept them,
    named only in the last resume's ``salvage_gaps`` (a resume that records
    ``events_cut`` generated them again, so they are whole).
    """
    gaps: list[Any] = []
    if manifest.get("status") != "complete":
        salvage = manifest.get("salvage")
        listed = salvage.get("events_cut") if isinstance(salvage, dict) else None
        gaps = list(manifest.get("capture_gaps") or [])
        ids = {str(r) for r in listed} if isinstance(listed, list) else set()
    else:
        resumed = manifest.get("resumed")
        last = resumed[-1] if isinstance(resumed, list) and resumed else None
        if isinstance(last, dict) and "events_cut" not in last:
            gaps = list(last.get("salvage_gaps") or [])
        ids = set()
    ids |= {g[: -len(CUT_GAP)] for g in gaps if isinstance(g, str) and g.endswith(CUT_GAP)}
    return sorted(ids)


def _listed(ids: list[str], most: int = 3) -> str:
    shown = ", ".join(repr(i) for i in ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")


def partial_warning(run: Run, allowed: bool) -> str | None:
    """None for a whole run; else refused (one line) or, with ``allowed``, the warning.

    A run is not whole when it is ``partial``, or when some request's events stop short
    of its output (:func:`cut_requests`), whatever its status says. Unfinished counts
    every prompt of the run (``corpus.prompts``): those cut off, those whose events
    are cut, and those never started.
    """
    cut = cut_requests(run.manifest)
    if run.complete and not cut:
        return None
    salvage = run.manifest.get("salvage") or {}
    unfinished = salvage.get("unfinished") if isinstance(salvage, dict) else None
    corpus = run.manifest.get("corpus")
    total = corpus.get("prompts") if isinstance(corpus, dict) else None
    recorded = run.requests.num_rows
    if not isinstance(total, int) or isinstance(total, bool) or total < recorded:
        total = recorded
    if run.complete:
        detail = (
            f"{len(cut)} of {total} requests have events that stop short of their output "
            f"({_listed(cut)}: a step file cut by a crash, kept by a resume)"
        )
        if not allowed:
            raise TokenlensError(
                f"{run.path} is not complete although marked so: {detail}; trace it again, "
                "or give --allow-partial"
            )
        return f"{run.path}: run with cut events analysed (--allow-partial): {detail}"
    never = total - recorded
    if isinstance(unfinished, list):
        detail = f"{len(set(unfinished) | set(cut)) + never} of {total} requests unfinished"
    else:  # not salvaged: what the trace wrote before it stopped
        detail = f"{recorded} of {total} requests recorded"
    parts = [f"{never} never started"] if never else []
    if cut:
        parts.append(f"{len(cut)} with events cut short of their output: {_listed(cut)}")
    if parts:
        detail += f" ({'; '.join(parts)})"
    if not allowed:
        raise TokenlensError(
            f"{run.path} is a partial run (the trace did not finish; {detail}): "
            f"{continue_hint(run.path, run.manifest)}; or give --allow-partial"
        )
    counts = (
        "; its counters are derived from the events"
        if isinstance(run.manifest.get("salvaged_at"), str)
        else ""
    )
    return f"{run.path}: partial run analysed (--allow-partial): {detail}{counts}"


def unreconciled_warning(run: Run, allowed: bool) -> str | None:
    assert run.events is not None
    problems = reconcile(run.events, run.metrics, run.empty_steps)
    recorded = run.manifest.get("reconciliation") or {}
    if not problems and recorded.get("exact") is False:
        differences = recorded.get("differences")
        if not isinstance(differences, list) or not differences:
            differences = [differences or "the trace recorded a difference"]
        problems = [str(d) for d in differences]
    if not problems:
        return None
    if not allowed:
        raise TokenlensError(
            f"{run.path}: events do not match the run's counters ({problems[0]}"
            f"{f'; and {len(problems) - 1} more' if len(problems) > 1 else ''}); "
            "give --allow-unreconciled to analyse it anyway"
        )
    return (
        f"{run.path}: events do not match the run's counters, analysed "
        f"(--allow-unreconciled): {problems[0]}"
    )
