"""The analysis' confidence bins found by a query engine, without a global sort.

The bins are quantiles of ``top1_prob`` over every judged row with a finite one
(:func:`~tokenlens.analysis.decompose.confidence_bins`), so they need a few order
statistics of that column: the values at the ranks numpy's interpolation reads
(:func:`~tokenlens.analysis.quantiles.quantile_ranks`). Two grouped queries find them
exactly, each in memory bounded by its groups, on one machine or a cluster alike:

1. rows per bucket of width 2^-20 (``FLOOR(top1_prob * 2^20)``: a multiplication by a
   power of two and a floor, exact in IEEE arithmetic, so every engine and numpy put a
   value in the same bucket); their running total says which bucket holds each rank;
2. rows per distinct value, in those buckets only; their running totals within a
   bucket give the value at each rank.

(A ``ROW_NUMBER() OVER (ORDER BY top1_prob)`` would sort every row in one partition.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from tokenlens.analysis.decompose import bin_quantiles
from tokenlens.analysis.quantiles import linear_quantiles, quantile_ranks
from tokenlens.arrays import F64, I64

Runner = Callable[[str], pa.Table]
"""Runs one SQL query on the engine's ``tokens`` and returns its (small) result."""

CONF_ROW = (
    "judged AND script IS NOT NULL AND top1_prob > CAST('-Infinity' AS DOUBLE) "
    "AND top1_prob < CAST('Infinity' AS DOUBLE)"
)
"""A judged row with classes and a finite confidence (NaN sorts above infinity in both
engines, so the two comparisons leave it out)."""

SCALE = 1 << 20
BUCKET = f"CAST(FLOOR(top1_prob * CAST({SCALE} AS DOUBLE)) AS BIGINT)"

BUCKETS_QUERY = (
    f"SELECT {BUCKET} AS b, COUNT(*) AS n FROM tokens WHERE {CONF_ROW}{{where}} GROUP BY {BUCKET}"
)
VALUES_QUERY = (
    f"SELECT top1_prob AS v, COUNT(*) AS n FROM tokens WHERE {CONF_ROW}{{where}} "
    f"AND {BUCKET} IN ({{buckets}}) GROUP BY top1_prob"
)


def confidence_edges(run: Runner, where: str = "") -> F64 | None:
    """The confidence bins' edges, as ``confidence_bins`` finds them over the same rows
    (None without a judged row with a finite confidence; ``where``: an SQL condition
    that narrows the rows, such as ``k = 3``): numpy's interpolation of the order
    statistics (:func:`order_statistics`), the distinct values."""
    where = f" AND ({where})" if where else ""
    buckets = _sorted(run(BUCKETS_QUERY.format(where=where)), "b")
    n = int(buckets[1].sum())
    if n == 0:
        return None
    qs = bin_quantiles()
    previous, following, _ = quantile_ranks(n, qs)
    ranks = np.unique(np.concatenate([previous, following]))
    at = order_statistics(run, buckets, ranks, where)

    def value_at(ranks: I64) -> F64:
        return np.array([at[int(r)] for r in ranks], dtype=np.float64)

    return np.unique(linear_quantiles(n, qs, value_at))


def order_statistics(
    run: Runner, buckets: tuple[I64, I64], ranks: I64, where: str = ""
) -> dict[int, float]:
    """The value at each 0-based rank of the sorted confidences, from the rows per
    bucket (``buckets``: bucket numbers and counts, in order) and one query for the
    distinct values of the buckets those ranks fall in."""
    number, count = buckets
    ends = np.cumsum(count)  # rank r is in bucket i when ends[i - 1] <= r < ends[i]
    holding = np.searchsorted(ends, ranks, side="right")  # each rank's bucket
    needed = np.unique(number[holding])
    found = run(VALUES_QUERY.format(buckets=", ".join(map(str, needed)), where=where))
    values, counts = _sorted(found, "v")
    values = values.astype(np.float64)
    of_value = np.floor(values * float(SCALE)).astype(np.int64)  # the query's bucket
    out = {}
    for rank, i in zip(ranks, holding, strict=True):
        mine = of_value == number[i]
        within = int(rank) - int(ends[i] - count[i])  # rank within its bucket
        running = np.cumsum(counts[mine])
        out[int(rank)] = float(values[mine][np.searchsorted(running, within, side="right")])
    return out


def _sorted(table: pa.Table, key: str) -> tuple[np.ndarray[Any, Any], I64]:
    """A query's (key, n) columns as arrays, in key order."""
    keys = np.asarray(table.column(key).to_pylist())
    counts = np.asarray(table.column("n").to_pylist(), dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    return keys[order], counts[order]
