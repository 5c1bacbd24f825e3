"""Runs that share requests: the same prompt under the same drafter in two runs.

The analysis pools runs of one drafter (method, drafter model, k) and clusters on
prompts, so a prompt traced in two such runs (the demo's n-gram k=3 run beside the
full study's, whose prompts include the demo's) would count every one of its output
tokens twice and narrow every interval. Whole-run copies are refused elsewhere
(:func:`tokenlens.analysis.inputs.validate_inputs`); this module finds the requests two
runs share, by prompt id or by prompt token ids, whatever else differs (max_tokens,
spelled-out defaults). :func:`resolve_overlap` refuses them in one line unless the user
said how to treat them (``--overlap keep-longest``: each shared request once, from the
run where its output is longest).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tokenlens.capture.reconcile import counters_from_events
from tokenlens.errors import TokenlensError
from tokenlens.rundir import Run

OVERLAP_CHOICES = ("refuse", "keep-longest")
"""``--overlap``: refuse runs that share requests (default), or keep each shared request
once, from the run with its longest output (ties: the run that sorts first)."""


def drafter(run: Run) -> tuple[str, str, int]:
    """What a request's events depend on besides its prompt: method, drafter model, k."""
    spec = run.manifest.get("speculative")
    model = spec.get("model") if isinstance(spec, dict) else None
    return run.method, str(model), run.k


def _prompt_keys(run: Run) -> list[tuple[str, Any]]:
    """Per request: its prompt id, and its prompt token ids where recorded."""
    ids = run.requests.column("prompt_id").to_pylist()
    tokens = run.requests.column("prompt_token_ids").to_pylist()
    return [(str(p), tuple(t) if t is not None else None) for p, t in zip(ids, tokens, strict=True)]


def shared_requests(runs: list[Run]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """(run a, run b) -> [(row in a, row in b), ...] for runs of one drafter sharing prompts."""
    out: dict[tuple[int, int], list[tuple[int, int]]] = {}
    keys = [_prompt_keys(run) for run in runs]
    for b in range(len(runs)):
        for a in range(b):
            if drafter(runs[a]) != drafter(runs[b]):
                continue
            by_id = {pid: i for i, (pid, _) in enumerate(keys[a])}
            by_tokens = {t: i for i, (_, t) in enumerate(keys[a]) if t is not None}
            pairs = []
            for j, (pid, tokens) in enumerate(keys[b]):
                i = by_id.get(pid)
                if i is None and tokens is not None:
                    i = by_tokens.get(tokens)
                if i is not None:
                    pairs.append((i, j))
            if pairs:
                out[(a, b)] = pairs
    return out


def _listed(ids: list[str], most: int = 3) -> str:
    shown = ", ".join(repr(i) for i in ids[:most])
    return shown + (f" and {len(ids) - most} more" if len(ids) > most else "")


def resolve_overlap(runs: list[Run], policy: str) -> tuple[list[Run], list[str]]:
    """The runs with no request counted twice, and a warning per run that lost some.

    ``policy`` ``refuse``: the first pair of runs that share requests is one line naming
    both, how many they share and which. ``keep-longest``: a shared request stays in
    the run where its output is longest (the earlier run on a tie) and leaves the
    others, with its events; such a run's counters are then those of its remaining
    events (said in its warning), and a run left with nothing is dropped.
    """
    if policy not in OVERLAP_CHOICES:
        raise TokenlensError(f"--overlap {policy}: choose from {', '.join(OVERLAP_CHOICES)}")
    shared = shared_requests(runs)
    if not shared:
        return runs, []
    if policy == "refuse":
        (a, b), pairs = next(iter(shared.items()))
        ids = runs[b].requests.column("prompt_id").to_pylist()
        method, model, k = drafter(runs[b])
        who = f"{method}{'' if model == 'None' else ' ' + model} k={k}"
        raise TokenlensError(
            f"runs {runs[a].path} and {runs[b].path} share {len(pairs)} requests (the same "
            f"prompts under {who}: {_listed(sorted(str(ids[j]) for _, j in pairs))}): each "
            "would count twice; analyse them apart, or give --overlap keep-longest to keep "
            "each shared request once"
        )
    lengths = [
        pc.list_value_length(r.requests.column("output_token_ids")).fill_null(0).to_pylist()
        for r in runs
    ]
    drop: list[set[int]] = [set() for _ in runs]
    for (a, b), pairs in shared.items():
        for i, j in pairs:
            if i in drop[a] or j in drop[b]:
                continue
            loser, row = (a, i) if lengths[b][j] > lengths[a][i] else (b, j)
            drop[loser].add(row)
    out, warnings = [], []
    for run, rows in zip(runs, drop, strict=True):
        if not rows:
            out.append(run)
            continue
        warnings.append(
            f"{run.path}: {len(rows)} of {run.requests.num_rows} requests left out, kept "
            "from another run with a longer output (--overlap keep-longest); its counters "
            "are those of its remaining events"
        )
        if len(rows) < run.requests.num_rows:
            out.append(_without(run, rows))
    return out, warnings


def _without(run: Run, rows: set[int]) -> Run:
    """``run`` without the requests at ``rows`` and their events; counters from the rest."""
    ids = run.requests.column("request_id").combine_chunks()
    run = only_requests(run, ids.filter(pa.array([i not in rows for i in range(len(ids))])))
    assert run.events is not None
    # Counted steps without rows stay with the run (grammar only; which request had them
    # is not recorded), so that its counters and events still agree.
    return replace(run, metrics=counters_from_events(run.events, run.empty_steps))


def only_requests(run: Run, ids: pa.Array) -> Run:
    """``run`` with only the requests whose id is in ``ids`` and their events, in their
    order (request ids are unique: the input checks); its counters as they were."""
    requests = run.requests.filter(pc.is_in(run.requests.column("request_id"), value_set=ids))
    events = run.events
    if events is not None:
        events = events.filter(pc.is_in(events.column("request_id"), value_set=ids))
    return replace(run, requests=requests, events=events)
