"""What a replay writes for one (method, k): its events table and its manifest.

Contract: :func:`events_table` turns replayed rows into ``events.parquet``'s table
(:data:`tokenlens.capture.events.EVENTS_SCHEMA`); :func:`replay_manifest` is the
source's manifest with what describes its generation replaced by the replay's method,
k, drafter and options, and a signature (:func:`replayed_signature`) that no traced
run's equals.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tokenlens import __version__
from tokenlens.capture.events import EVENTS_SCHEMA
from tokenlens.replay.source import Source
from tokenlens.replay.steps import Branch, Row
from tokenlens.rundir import now_iso
from tokenlens.signature import make_signature, parse_signature

# Manifest keys of the source that describe its generation, not the replay.
NOT_INHERITED = (
    "signature",
    "status",
    "timing",
    "reconciliation",
    "finished_at",
    "created_at",
    "argv",
    "speculative",
    "bench",
    "capture_gaps",
    "salvaged_at",
    "counters_source",
)


def events_table(rows_by_request: dict[str, list[Row]], order: Sequence[str]) -> pa.Table:
    """The rows of every request in ``order``, as ``events.parquet``'s table."""
    cols: dict[str, list[Any]] = {name: [] for name in EVENTS_SCHEMA.names}
    for rid in order:
        for row in rows_by_request.get(rid, []):
            assert not isinstance(row.draft, Branch)
            cols["request_id"].append(rid)
            cols["step"].append(row.step)
            cols["position"].append(row.position)
            cols["draft_token_id"].append(row.draft)
            cols["accepted"].append(row.accepted)
            cols["emitted_token_id"].append(row.emitted)
            cols["output_index"].append(row.output_index)
    return pa.table(cols, schema=EVENTS_SCHEMA)


def replayed_signature(source_signature: str, method: str, k: int, drafter: str | None) -> str:
    """The source's signature with method, k and drafter replaced, and ``replayed:<hash>``.

    The hash names the source (first 12 hex of the SHA-256 of its signature), so two
    replays are comparable only if they come from the same run, and no replayed
    signature equals a traced one.
    """
    fields: dict[str, Any] = dict(parse_signature(source_signature))
    fields.update(method=method, k=k, draft=drafter)
    fields["replayed"] = hashlib.sha256(source_signature.encode()).hexdigest()[:12]
    return make_signature(fields)


def replay_manifest(
    source: Source,
    method: str,
    k: int,
    drafter: str | None,
    options: dict[str, int],
    argv: Sequence[str] = (),
) -> dict[str, Any]:
    """The manifest of the replayed run of ``method`` at ``k`` from ``source``."""
    base = {k_: v for k_, v in source.manifest.items() if k_ not in NOT_INHERITED}
    return {
        **base,
        "signature": replayed_signature(str(source.manifest["signature"]), method, k, drafter),
        "tokenlens_version": __version__,
        "speculative": {
            "method": method,
            "model": drafter,
            "num_speculative_tokens": k,
            "options": options,
        },
        "created_at": now_iso(),
        "argv": list(argv) or sys.argv,
        "replayed_from": str(source.manifest["signature"]),
        "replay_source": str(source.run.path),
    }
