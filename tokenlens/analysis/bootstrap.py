"""Request-clustered bootstrap: one set of seeded resampling weights for every statistic.

Tokens of one request share its topic, its style and the drafter's luck with it, so
they are not independent: a token-level interval would be far too narrow. Every
statistic here is a smooth function of *totals* (accepted, judged, rows, characters),
so a bootstrap replicate is just the same totals with each request counted as often
as it was drawn. We draw the multinomial request counts once per analysis (stratified
by run and language, so each replicate keeps every stratum's number of requests) and
reuse them for all statistics: differences and decompositions then get consistent,
jointly resampled intervals, and the seed alone fixes every number.

Intervals are percentile intervals of the replicates (95% by default).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its bootstrap interval and the rows it rests on."""

    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int

    def to_json(self, name: str = "value") -> dict[str, Any]:
        return {name: self.value, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}


@dataclass(frozen=True)
class Totals:
    """Per-group totals: the point value (shape (G,)) and replicates (shape (B, G))."""

    point: F64
    boot: F64


class Resampler:
    """Seeded multinomial weights over clusters (requests), stratified.

    ``cluster`` gives each row its cluster code (0..C-1); ``stratum`` gives each
    cluster its stratum. ``weights[b, c]`` is how often cluster ``c`` is drawn in
    replicate ``b``.
    """

    def __init__(self, cluster: I64, stratum: I64, n_boot: int, seed: int) -> None:
        self.cluster = cluster
        self.n_clusters = len(stratum)
        self.n_boot = n_boot
        rng = np.random.default_rng(seed)
        weights = np.zeros((n_boot, self.n_clusters), dtype=np.float64)
        for s in np.unique(stratum):
            members = np.flatnonzero(stratum == s)
            m = len(members)
            weights[:, members] = rng.multinomial(m, np.full(m, 1.0 / m), size=n_boot)
        self.weights = weights

    @classmethod
    def from_frame(cls, frame: pd.DataFrame, n_boot: int, seed: int) -> Resampler:
        """Clusters = (run, request_id); strata = (run, lang)."""
        cluster, uniques = pd.factorize(
            pd.MultiIndex.from_arrays([frame["run"].astype(str), frame["request_id"].astype(str)])
        )
        first = np.unique(cluster, return_index=True)[1]
        strata_keys = pd.MultiIndex.from_arrays(
            [
                frame["run"].astype(str).to_numpy()[first],
                frame["lang"].astype(str).to_numpy()[first],
            ]
        )
        stratum = pd.factorize(strata_keys)[0]
        assert len(first) == len(uniques)
        return cls(cluster.astype(np.int64), stratum.astype(np.int64), n_boot, seed)

    def totals(self, values: F64, group: I64, n_groups: int, rows: npt.NDArray[np.bool_]) -> Totals:
        """Sums of ``values`` per group over ``rows``, plus every replicate's sums."""
        keep = rows & (group >= 0)
        idx = self.cluster[keep] * n_groups + group[keep]
        per_cluster = np.bincount(
            idx, weights=values[keep], minlength=self.n_clusters * n_groups
        ).reshape(self.n_clusters, n_groups)
        return Totals(point=per_cluster.sum(axis=0), boot=self.weights @ per_cluster)

    def clusters_with(self, group: I64, n_groups: int, rows: npt.NDArray[np.bool_]) -> I64:
        """Number of clusters with at least one row in each group."""
        keep = rows & (group >= 0)
        pairs = np.unique(self.cluster[keep] * n_groups + group[keep])
        return np.bincount(pairs % n_groups, minlength=n_groups).astype(np.int64)


def interval(point: F64, boot: F64, level: float = LEVEL) -> tuple[F64, F64, F64]:
    """Percentile interval per column; NaN where the statistic is undefined."""
    alpha = (1.0 - level) / 2.0
    with np.errstate(all="ignore"):
        finite = np.isfinite(boot)
        boot = np.where(finite, boot, np.nan)
        ok = finite.mean(axis=0) >= 0.5 if boot.size else np.zeros(point.shape, dtype=bool)
        safe = np.where(ok, 1.0, np.nan)
        if boot.shape[0]:
            lo = np.nanquantile(np.where(ok, boot, 0.0), alpha, axis=0) * safe
            hi = np.nanquantile(np.where(ok, boot, 0.0), 1.0 - alpha, axis=0) * safe
        else:
            lo = hi = np.full(point.shape, np.nan)
    return point, lo, hi


def ratio(num: Totals, den: Totals) -> tuple[F64, F64, F64]:
    """num / den per group with its percentile interval."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return interval(num.point / den.point, num.boot / den.boot)


def statistic(fn: Callable[[F64, F64], F64], num: Totals, den: Totals) -> tuple[F64, F64, F64]:
    """Any function of (num, den) totals, applied to the point and every replicate.

    ``fn`` takes arrays whose last axis is the group axis and returns the statistic
    along a new last axis, so it runs unchanged on shape (G,) and (B, G).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        return interval(fn(num.point, den.point), fn(num.boot, den.boot))


def as_float(x: float | np.floating[Any]) -> float | None:
    """JSON-safe float: NaN/inf become None."""
    value = float(x)
    return value if np.isfinite(value) else None


def estimate(point: float, lo: float, hi: float, n: int) -> Estimate:
    return Estimate(as_float(point), as_float(lo), as_float(hi), int(n))
