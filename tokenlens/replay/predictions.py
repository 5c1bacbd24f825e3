"""What a replay's vLLM passes found, kept beside its runs as ``predictions.parquet``.

Per request: the drafter's greedy token and logit margin (top-1 minus top-2 logprob)
at every output position, its continuation past the end, the target's tokens past
the end and where they came from, and the branch continuations after rejected
drafts. The margins are what explains a mismatch with a real trace: a small margin
is a near-tie that vLLM's prefill and decode paths may break differently.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from tokenlens.engine.passes import PassResult
from tokenlens.replay.source import SourceRequest

PREDICTIONS = "predictions.parquet"

SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        # index i: output index i (index 0 is predicted from the prompt alone)
        ("drafter_argmax", pa.list_(pa.int64())),
        ("drafter_margin", pa.list_(pa.float64())),
        ("drafter_continuation", pa.list_(pa.int64())),
        ("drafter_continuation_margin", pa.list_(pa.float64())),
        ("lookahead", pa.list_(pa.int64())),
        ("lookahead_margin", pa.list_(pa.float64())),
        ("lookahead_from", pa.string()),  # "source events", "target pass" or null
        ("branch_points", pa.list_(pa.int64())),
        ("branch_tokens", pa.list_(pa.list_(pa.int64()))),
        ("branch_margins", pa.list_(pa.list_(pa.float64()))),
    ]
)


@dataclass
class Predictions:
    """Filled pass by pass during a replay, keyed by request id."""

    drafter: dict[str, PassResult] = field(default_factory=dict)
    branches: dict[str, dict[int, PassResult]] = field(default_factory=dict)
    ngram: dict[str, tuple[tuple[int, ...], ...]] = field(default_factory=dict)
    lookahead: dict[str, tuple[int, ...]] = field(default_factory=dict)
    lookahead_margin: dict[str, tuple[float, ...]] = field(default_factory=dict)
    lookahead_from: dict[str, str] = field(default_factory=dict)


def _margins(values: Sequence[float]) -> list[float | None]:
    return [None if math.isnan(v) else v for v in values]


def predictions_table(requests: Sequence[SourceRequest], pred: Predictions) -> pa.Table:
    rows: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    for req in requests:
        rid, p = req.request_id, len(req.prompt_ids)
        scored = pred.drafter.get(rid)
        rows["request_id"].append(rid)
        rows["drafter_argmax"].append(list(scored.argmax[p:]) if scored else None)
        rows["drafter_margin"].append(_margins(scored.margin[p:]) if scored else None)
        rows["drafter_continuation"].append(list(scored.generated) if scored else None)
        rows["drafter_continuation_margin"].append(
            _margins(scored.generated_margin) if scored else None
        )
        rows["lookahead"].append(list(pred.lookahead.get(rid, req.lookahead)))
        rows["lookahead_margin"].append(_margins(pred.lookahead_margin.get(rid, ())))
        rows["lookahead_from"].append(
            pred.lookahead_from.get(rid, "source events" if req.lookahead else None)
        )
        branches = sorted(pred.branches.get(rid, {}).items())
        rows["branch_points"].append([point for point, _ in branches])
        rows["branch_tokens"].append([list(b.generated) for _, b in branches])
        rows["branch_margins"].append([_margins(b.generated_margin) for _, b in branches])
    return pa.table(rows, schema=SCHEMA)
