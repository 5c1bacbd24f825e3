"""Hand-built run directories: every event written out, so each figure can be computed
by hand in the tests that use them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tokenlens.capture.events import EVENTS_SCHEMA
from tokenlens.engine.results import SpecCounters
from tokenlens.rundir import EVENTS, REQUESTS_SCHEMA, RunWriter

# (request_id, lang, pair, output ids, output text): qwen2.5 ids
JA = ("ja-1", "ja", "p1", [128976, 105188, 5373, 102356, 46553, 15767], "私は昨日、東京の")
EN = ("en-1", "en", "p1", [785, 3974, 13876, 38835, 34208], "The quick brown fox jumps")

Event = tuple[str, int, int, int, bool, int | None, int | None]
"""(request, step, position, draft, accepted, emitted, output_index)"""


def write_run(
    path: Path,
    method: str,
    k: int,
    events: Sequence[Event],
    requests: Sequence[tuple[str, str, str, list[int], str]] = (JA, EN),
    tokenizer: str = "qwen2.5",
) -> Path:
    """A complete run directory whose counters are those of ``events``."""
    manifest: dict[str, Any] = {
        "signature": f"tokenlens:test|method:{method}|k:{k}|seed:0",
        "tokenlens_version": "test",
        "vllm_version": "test",
        "model": "test",
        "tokenizer": tokenizer,
        "speculative": {"method": method, "model": "d", "num_speculative_tokens": k},
        "sampling": {},
        "created_at": "2026-01-01T00:00:00+00:00",
        "argv": [],
    }
    writer = RunWriter(path, manifest)
    n = len(requests)
    table = {
        "request_id": [r[0] for r in requests],
        "prompt_id": [r[0] for r in requests],
        "lang": [r[1] for r in requests],
        "pair": [r[2] for r in requests],
        "output_text": [r[4] for r in requests],
        "output_token_ids": [r[3] for r in requests],
        "finish_reason": ["length"] * n,
        "prompt_token_count": [0] * n,
        "vllm_request_id": [None] * n,
        "first_token_latency": [None] * n,
        "token_logprob": [None] * n,
        "token_rank": [None] * n,
        "top_ids": [None] * n,
        "top_logprobs": [None] * n,
    }
    writer.write_requests(pa.table(table, schema=REQUESTS_SCHEMA))
    cols = list(zip(*events, strict=True))
    pq.write_table(
        pa.table(dict(zip(EVENTS_SCHEMA.names, cols, strict=True)), schema=EVENTS_SCHEMA),
        path / EVENTS,
    )
    per_pos = [0] * k
    for e in events:
        if e[4]:
            per_pos[e[2]] += 1
    drafts = len({(e[0], e[1]) for e in events})
    accepted = sum(bool(e[4]) for e in events)
    writer.write_metrics(SpecCounters(drafts, len(events), accepted, tuple(per_pos)))
    writer.complete()
    return path
