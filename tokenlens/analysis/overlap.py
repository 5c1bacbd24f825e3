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
from typing import TypeVar

import pyarrow as pa

from tokenlens.analysis.reread import only_requests
from tokenlens.analysis.run_facts import RunFacts
from tokenlens.capture.reconcile import counters_from_events
from tokenlens.errors import TokenlensError
from tokenlens.rundir import Run, read_run

T = TypeVar("T")

OVERLAP_CHOICES = ("refuse", "keep-longest")
"""``--overlap``: refuse runs that share requests (default), or keep each shared request
once, from the run with its longest output (ties: the run that sorts first)."""


def drafter(run: Run) -> tuple[str, str, int]:
    """What a request's events depend on besides its prompt: method, drafter model, k."""
    spec = run.manifest.get("speculative")
    model = spec.get("model") if isinstance(spec, dict) else None
    return run.method, str(model), run.k


def shared_requests(runs: list[RunFacts]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """(run a, run b) -> [(row in a, row in b), ...] for runs of one drafter sharing
    prompts: the same prompt id, or the same prompt token ids where recorded."""
    out: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for b in range(len(runs)):
        for a in range(b):
            if drafter(runs[a].run) != drafter(runs[b].run):
                continue
            by_id = {pid: i for i, pid in enumerate(runs[a].prompt_ids)}
            by_tokens = {t: i for i, t in enumerate(runs[a].prompts) if t is not None}
            pairs = []
            for j, (pid, tokens) in enumerate(
                zip(runs[b].prompt_ids, runs[b].prompts, strict=True)
            ):
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


def resolve_overlap(runs: list[RunFacts], policy: str) -> tuple[list[RunFacts], list[str]]:
    """The runs with no request counted twice, and a warning per run that lost some.

    ``policy`` ``refuse``: the first pair of runs that share requests is one line naming
    both, how many they share and which. ``keep-longest``: a shared request stays in
    the run where its output is longest (the earlier run on a tie) and leaves the
    others, with its events; such a run's counters are then those of its remaining
    events (said in its warning; the run is read again to count them), and a run left
    with nothing is dropped.
    """
    if policy not in OVERLAP_CHOICES:
        raise TokenlensError(f"--overlap {policy}: choose from {', '.join(OVERLAP_CHOICES)}")
    shared = shared_requests(runs)
    if not shared:
        return runs, []
    if policy == "refuse":
        (a, b), pairs = next(iter(shared.items()))
        ids = runs[b].prompt_ids
        method, model, k = drafter(runs[b].run)
        who = f"{method}{'' if model == 'None' else ' ' + model} k={k}"
        raise TokenlensError(
            f"runs {runs[a].path} and {runs[b].path} share {len(pairs)} requests (the same "
            f"prompts under {who}: {_listed(sorted(str(ids[j]) for _, j in pairs))}): each "
            "would count twice; analyse them apart, or give --overlap keep-longest to keep "
            "each shared request once"
        )
    lengths = [r.output_lengths for r in runs]
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
        total = len(run.request_ids)
        warnings.append(
            f"{run.path}: {len(rows)} of {total} requests left out, kept "
            "from another run with a longer output (--overlap keep-longest); its counters "
            "are those of its remaining events"
        )
        if len(rows) < total:
            out.append(_without(run, rows))
    return out, warnings


def _without(facts: RunFacts, rows: set[int]) -> RunFacts:
    """``facts`` without the requests at ``rows`` and their events; counters from the
    rest (the run read again to count them)."""

    def keep(values: tuple[T, ...]) -> tuple[T, ...]:
        return tuple(v for i, v in enumerate(values) if i not in rows)

    kept = keep(facts.request_ids)
    run = only_requests(read_run(facts.path), pa.array(kept, pa.string()))
    assert run.events is not None
    # Counted steps without rows stay with the run (grammar only; which request had them
    # is not recorded), so that its counters and events still agree.
    metrics = counters_from_events(run.events, run.empty_steps)
    snap = replace(
        facts.snapshot,
        requests=run.requests.num_rows,
        events=run.events.num_rows,
        kept=frozenset(kept),
    )
    return replace(
        facts,
        run=replace(facts.run, metrics=metrics),
        snapshot=snap,
        request_ids=kept,
        prompt_ids=keep(facts.prompt_ids),
        prompts=keep(facts.prompts),
        output_lengths=keep(facts.output_lengths),
    )
