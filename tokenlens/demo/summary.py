"""``summary.md`` of a study: the counters of every analysed run (and, in the full
size, of the real traces they were replayed from), each run's signature, and the
replay checked against the real traces row for row (``replay/check.json``).

Read from the run directories alone, so :func:`tokenlens.demo.reanalyze` can write it
again for a finished study.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenlens.replay.compare import known_rows
from tokenlens.rundir import read_run


def replay_check(traced: Path, replayed: Path) -> dict[str, Any]:
    """A real trace against the replayed run of the same method and k, row for row.

    ``equal_rows``: all seven event columns equal (:func:`tokenlens.replay.compare.
    compare_runs`). ``equal_judged``: equal when a draft the replay left -1 counts as
    a match: a replay without branch drafts writes -1 for the drafts after a step's
    first rejection (never judged by the target; only the rejection kinds read them),
    which a real trace shows. ``unknown_drafts``: those -1 rows. Reported over the rows
    whose draft the replay knows: :func:`tokenlens.replay.compare.known_rows`.
    """
    from tokenlens.replay.compare import KEY, compare_runs

    a, b = read_run(traced), read_run(replayed)
    agreement = compare_runs(a, b)
    assert a.events is not None and b.events is not None
    ta = a.events.to_pandas()
    tb = b.events.to_pandas()
    both = ta.merge(tb, on=list(KEY), how="inner", suffixes=("_t", "_r"))
    same = both["draft_token_id_r"].eq(-1) | both["draft_token_id_t"].eq(both["draft_token_id_r"])
    for column in ("accepted", "emitted_token_id", "output_index"):
        t, r = both[f"{column}_t"], both[f"{column}_r"]
        same &= t.eq(r).fillna(False).astype(bool) | (t.isna() & r.isna())
    rates = {}
    for name, run in (("traced", a), ("replayed", b)):
        m = run.metrics
        rates[name] = m.acceptance_rate
    return {
        "traced": traced.name,
        "replayed": replayed.name,
        "requests": agreement.requests,
        "rows_traced": agreement.rows_traced,
        "rows_replayed": agreement.rows_replayed,
        "equal_rows": agreement.equal_rows,
        "equal_judged": int(same.sum()),
        "unknown_drafts": int(both["draft_token_id_r"].eq(-1).sum()),
        "differing_requests": [d.request_id for d in agreement.differing],
        "acceptance_traced": rates["traced"],
        "acceptance_replayed": rates["replayed"],
    }


def check_markdown(checks: Sequence[dict[str, Any]]) -> list[str]:
    """The replay-vs-trace table of summary.md."""
    if not checks:
        return []
    lines = [
        "Replay against the real traces (same method and k, row for row; docs/replay.md):",
        "",
        "| trace | replayed run | requests | event rows traced | rows replayed "
        "| rows whose draft the replay knows | of them equal in all 7 columns "
        "| drafts the replay left -1 | of them differing in another column "
        "| acceptance traced | acceptance replayed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in checks:
        rate = [
            f"{x:.4f}" if x is not None else "–"
            for x in (c["acceptance_traced"], c["acceptance_replayed"])
        ]
        n = known_rows(c)
        lines.append(
            f"| {c['traced']} | {c['replayed']} | {c['requests']} | {c['rows_traced']} | "
            f"{c['rows_replayed']} | {n['known']} | {n['equal_known']} | "
            f"{c['unknown_drafts']} | {n['unknown_differ']} | {rate[0]} | {rate[1]} |"
        )
    return [*lines, ""]


def _run_rows(paths: Sequence[Path]) -> tuple[list[str], list[str]]:
    rows, signatures = [], []
    for path in paths:
        run = read_run(path)
        m = run.metrics
        tokens = sum(len(x) for x in run.requests.column("output_token_ids").to_pylist())
        rate = f"{m.acceptance_rate:.3f}" if m.acceptance_rate is not None else "–"
        mal = f"{m.mean_acceptance_length:.2f}" if m.mean_acceptance_length is not None else "–"
        rows.append(
            f"| {path.name} | {run.requests.num_rows} | {tokens} | {m.num_drafts} | "
            f"{m.num_draft_tokens} | {m.num_accepted_tokens} | {rate} | {mal} | "
            f"{list(m.accepted_per_position)} |"
        )
        signatures.append(f"- `{path.parent.name}/{path.name}`: `{run.manifest['signature']}`")
    return rows, signatures


HEADER = [
    "| run | requests | output tokens | drafts | draft tokens | accepted | acceptance rate "
    "| mean acceptance length | accepted per position |",
    "|---|---|---|---|---|---|---|---|---|",
]


def summary_markdown(
    runs: list[Path],
    traces: Sequence[Path] = (),
    note: str | None = None,
    checks: Sequence[dict[str, Any]] = (),
) -> str:
    """A table of the counters per run, with the signature of each run.

    With ``traces`` (the full size), ``runs`` are replayed (counters derived from the
    events) and ``traces`` the real traces (vLLM's counters) they came from or check.
    """
    lines = ["# tokenlens demo", ""]
    if note is not None:
        lines += [f"> **Smoke-sized.** {note}", ""]
    rows, signatures = _run_rows(runs)
    if traces:
        lines += ["Replayed runs (analysed; counters derived from the events):", ""]
    lines += [*HEADER, *rows]
    if traces:
        more, sigs = _run_rows(traces)
        lines += ["", "Real traces (vLLM's counters):", "", *HEADER, *more]
        signatures += sigs
    if checks:
        lines += ["", *check_markdown(checks)]
    return "\n".join([*lines, "", "Signatures:", "", *signatures, ""])
