"""Quantiles from order statistics, as numpy computes them.

The confidence bins of the analysis are ``np.quantile`` (method ``linear``) of every
judged row's target confidence. A distributed engine can return the few order
statistics those quantiles interpolate (the values at given ranks of the sorted
column) without moving the column; :func:`linear_quantiles` then interpolates them
with numpy's own arithmetic (``numpy.lib._function_base_impl._quantile`` and
``_lerp``: the same operations in the same order), so the edges equal the analysis'
to the last digit (``tests/analysis/test_quantiles.py`` compares them bit for bit).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tokenlens.arrays import F64, I64


def quantile_ranks(n: int, qs: F64) -> tuple[I64, I64, F64]:
    """For ``n`` sorted values and quantiles ``qs``: the 0-based ranks of the two order
    statistics each quantile interpolates and its weight (numpy's virtual index,
    previous and next indexes and gamma; a quantile at or past the last rank reads
    the last value twice)."""
    if n < 1:
        raise ValueError("quantiles of no values")
    virtual = (n - 1) * np.asarray(qs, dtype=np.float64)
    previous = np.floor(virtual)
    following = previous + 1
    above = virtual >= n - 1
    previous[above] = n - 1
    following[above] = n - 1
    below = virtual < 0
    previous[below] = 0
    following[below] = 0
    gamma = np.asarray(virtual - previous, dtype=np.float64)
    return previous.astype(np.int64), following.astype(np.int64), gamma


def linear_quantiles(n: int, qs: F64, value_at: Callable[[I64], F64]) -> F64:
    """``np.quantile(values, qs)`` of ``n`` values, from ``value_at(ranks)``: the sorted
    values at those 0-based ranks (one order statistic per rank)."""
    previous, following, gamma = quantile_ranks(n, qs)
    a = np.asarray(value_at(previous), dtype=np.float64)
    b = np.asarray(value_at(following), dtype=np.float64)
    diff_b_a = np.subtract(b, a)
    out = np.asarray(np.add(a, diff_b_a * gamma))
    np.subtract(b, diff_b_a * (1 - gamma), out=out, where=gamma >= 0.5)
    return out
