"""Prompt-clustered bootstrap: one set of seeded weights for every statistic of an analysis.

*Units of evidence are prompts.* Tokens of one request share its topic and the
drafter's luck with it, and the same prompts appear in every run of a study (the
n-gram run and the trained drafter's run answer the same prompts; Japanese and English
prompts come in translated pairs). So a replicate redraws *prompts*, not tokens and not
(run, request) pairs: the cluster is the prompt pair when every prompt of the analysis
has one (each pair keeps its Japanese and English halves together), otherwise the
prompt, stratified by language. The same weights apply to the prompt's rows in every
run, so differences between runs and languages are resampled jointly.

Every statistic is a smooth function of totals (accepted, judged, rows, characters),
so a replicate is the same totals with each cluster counted as often as it was drawn.
The weights are drawn once per analysis from the seed and reused everywhere.

Intervals (``METHODS``; docs/analysis.md gives their measured coverage):

- ``t``: estimate ± t(df) · SE, with SE the bootstrap standard deviation inflated by
  sqrt(G / (G − H)) (the bootstrap's (G − 1)/G variance bias, per stratum) and
  df = G − H (G clusters with rows, H strata among them). Rates use the Wilson score
  interval with the same t quantile and the effective sample size p(1 − p) / SE²
  (the design effect of the clustering), so they stay inside [0, 1] and never collapse:
  a rate of exactly 0 or 1 gets the effective size of its number of clusters.
- ``percentile``: the plain 2.5%/97.5% bootstrap percentiles (kept for comparison:
  it is liberal with few clusters).

A statistic whose replicates are undefined more than half of the time, or that rests
on a single cluster, gets no interval (``None``); so does a difference whose replicates
never vary (a zero-width interval would read as certainty).
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy import stats

from tokenlens.analysis.columns import labels
from tokenlens.analysis.summary_figures import Estimate
from tokenlens.arrays import F64, I64, Mask

LEVEL = 0.95
DECISION_LEVEL = 0.90
"""The level of the interval a verdict reads (see :mod:`tokenlens.analysis.verdicts`):
each reading is a one-sided test at (1 − DECISION_LEVEL) / 2 = 5%, two of them (the
effect below −δ, or above it) make the 90% interval, as in the TOST convention."""
METHODS = ("t", "percentile")
DEFAULT_METHOD = "t"


def missing(reason: str, n: int = 0) -> dict[str, Any]:
    """A figure the data cannot support: null value and interval, with the reason."""
    return Estimate(None, None, None, n, not_estimable=reason).to_json()


@dataclass(frozen=True)
class Totals:
    """Per-group totals: the point value (shape (G,)) and replicates (shape (B, G))."""

    point: F64
    boot: F64


def prompt_keys(frame: pd.DataFrame) -> npt.NDArray[np.object_]:
    """The prompt each row belongs to: ``prompt_id``, else the request id without ``#i``."""
    if "prompt_id" in frame:
        prompt: npt.NDArray[np.object_] = labels(frame, "prompt_id")
        if all(p not in ("", "nan", "None", "<NA>") for p in pd.unique(prompt)):
            return prompt
    request = labels(frame, "request_id")
    return np.asarray([r.split("#", 1)[0] for r in request], dtype=object)


def pair_keys(frame: pd.DataFrame) -> npt.NDArray[np.object_] | None:
    """Each row's prompt pair, or None unless every row has one."""
    if "pair" not in frame:
        return None
    pair: npt.NDArray[np.object_] = labels(frame, "pair")
    if len(pair) == 0 or any(p in ("", "nan", "None", "<NA>") for p in pd.unique(pair)):
        return None
    return pair


def clusters_of(frame: pd.DataFrame) -> tuple[I64, I64, str]:
    """Each row's cluster code, each cluster's stratum and the unit's name: prompt pairs
    when every row has one (one stratum), else prompts stratified by language. Reads
    ``pair``, ``prompt_id``, ``request_id`` and ``lang`` only."""
    pairs = pair_keys(frame)
    if pairs is not None:
        # sort: cluster codes (and so every replicate) do not depend on row order,
        # i.e. on the order in which the runs were given
        cluster, _ = pd.factorize(pairs, sort=True)
        stratum = np.zeros(int(cluster.max()) + 1 if len(cluster) else 0, dtype=np.int64)
        return np.asarray(cluster, dtype=np.int64), stratum, "prompt pair"
    prompts = prompt_keys(frame)
    lang = labels(frame, "lang")
    cluster, uniques = pd.factorize(prompts, sort=True)
    first = np.unique(cluster, return_index=True)[1]
    stratum = pd.factorize(lang[first])[0].astype(np.int64)
    assert len(first) == len(uniques)
    return np.asarray(cluster, dtype=np.int64), stratum, "prompt (stratified by language)"


class Cells:
    """Rows by (cluster, group): the rows among ``rows`` with a group (``group >= 0``)
    and each one's cell, ``cluster * n_groups + group``. Sums over the same rows and
    groups read one index instead of masking and indexing every row again."""

    def __init__(self, rs: Resampler, group: I64, n_groups: int, rows: Mask) -> None:
        self.keep: Mask = rows & (group >= 0)
        self.index: I64 = rs.cluster[self.keep] * n_groups + group[self.keep]
        self.shape = (rs.n_clusters, n_groups)
        self._counts: F64 | None = None

    def sums(self, values: F64) -> F64:
        """Sums of ``values`` per (cluster, group): shape (C, n_groups)."""
        size = self.shape[0] * self.shape[1]
        sums = np.bincount(self.index, weights=values[self.keep], minlength=size)
        return np.asarray(sums, dtype=np.float64).reshape(self.shape)

    def counts(self) -> F64:
        """Rows per (cluster, group), as float64 (exact: whole numbers below 2^53)."""
        if self._counts is None:
            size = self.shape[0] * self.shape[1]
            counts = np.bincount(self.index, minlength=size).astype(np.float64)
            self._counts = counts.reshape(self.shape)
        return self._counts

    def present(self) -> npt.NDArray[np.bool_]:
        """Whether cluster c has a row in group g: shape (C, n_groups)."""
        return self.counts() > 0

    def clusters(self) -> I64:
        """Number of clusters with at least one row in each group."""
        return np.asarray(self.present().sum(axis=0), dtype=np.int64)


class Resampler:
    """Seeded multinomial weights over clusters, stratified.

    ``cluster`` gives each row its cluster code (0..C-1); ``stratum`` gives each
    cluster its stratum. ``weights[b, c]`` is how often cluster ``c`` is drawn in
    replicate ``b``. ``method`` picks the interval (``METHODS``).
    """

    def __init__(
        self,
        cluster: I64,
        stratum: I64,
        n_boot: int,
        seed: int,
        method: str = DEFAULT_METHOD,
        level: float = LEVEL,
        unit: str = "cluster",
        decision_level: float = DECISION_LEVEL,
    ) -> None:
        if method not in METHODS:
            raise ValueError(f"unknown interval method {method!r} (one of {METHODS})")
        self.cluster = cluster
        self.stratum = stratum
        self.n_clusters = len(stratum)
        self.n_boot = n_boot
        self.method = method
        self.level = level
        self.decision_level = decision_level
        self.unit = unit
        rng = np.random.default_rng(seed)
        weights = np.zeros((n_boot, self.n_clusters), dtype=np.float64)
        for s in np.unique(stratum):
            members = np.flatnonzero(stratum == s)
            m = len(members)
            weights[:, members] = rng.multinomial(m, np.full(m, 1.0 / m), size=n_boot)
        self.weights = weights

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        n_boot: int,
        seed: int,
        method: str = DEFAULT_METHOD,
        level: float = LEVEL,
        decision_level: float = DECISION_LEVEL,
    ) -> Resampler:
        """Clusters = prompt pairs (all prompts paired) or prompts stratified by language."""
        cluster, stratum, unit = clusters_of(frame)
        return cls(cluster, stratum, n_boot, seed, method, level, unit, decision_level)

    def restricted(self, rows: Mask) -> Resampler:
        """The same replicates for a subset of the rows (``frame[rows]``): every cluster
        keeps its weights, so a figure of the subset is resampled exactly as it is
        inside the whole analysis (the per-k verdicts, docs/analysis.md)."""
        out = copy.copy(self)
        out.cluster = self.cluster[rows]
        return out

    # -- totals ---------------------------------------------------------------------
    def cells(self, group: I64, n_groups: int, rows: Mask) -> Cells:
        """The rows among ``rows`` that have a group, indexed by (cluster, group): build
        it once for every sum, count and presence over the same rows and groups."""
        return Cells(self, group, n_groups, rows)

    def total(self, per_cluster: F64) -> Totals:
        """The point sums and every replicate's sums of a (C, n_groups) table."""
        return Totals(point=per_cluster.sum(axis=0), boot=self.weights @ per_cluster)

    def counted(
        self, values: F64, group: I64, n_groups: int, rows: Mask
    ) -> tuple[Totals, Totals, Cells]:
        """A rate's totals per group over ``rows``: the sums of ``values``, the rows, and
        the cells they were counted in (for :meth:`Cells.clusters` and
        :meth:`design_of`)."""
        cells = self.cells(group, n_groups, rows)
        return self.total(cells.sums(values)), self.total(cells.counts()), cells

    def count(self, rows: Mask) -> int:
        """How many rows ``rows`` selects, as the cells count them (a subclass whose rows
        stand for several events counts those)."""
        return int(self.cells(np.zeros(len(rows), dtype=np.int64), 1, rows).counts().sum())

    def design(self, rows: Mask) -> tuple[int, int]:
        """(G, H): clusters with a row among ``rows``, and the strata they fall in."""
        used = np.flatnonzero(np.bincount(self.cluster[rows], minlength=self.n_clusters))
        if len(used) == 0:
            return 0, 0
        return len(used), len(np.unique(self.stratum[used]))

    def group_design(self, group: I64, n_groups: int, rows: Mask) -> tuple[I64, I64]:
        """(G, H) per group."""
        return self.design_of(self.cells(group, n_groups, rows))

    def design_of(self, cells: Cells) -> tuple[I64, I64]:
        """(G, H) per group of ``cells``: clusters with a row, and the strata among them."""
        present = cells.present()
        g_out = present.sum(axis=0).astype(np.int64)
        h_out = np.zeros(present.shape[1], dtype=np.int64)
        for g in range(present.shape[1]):
            used = np.flatnonzero(present[:, g])
            h_out[g] = len(np.unique(self.stratum[used])) if len(used) else 0
        return g_out, h_out

    # -- intervals ------------------------------------------------------------------
    def interval(self, point: F64, boot: F64, g: I64 | int, h: I64 | int) -> tuple[F64, F64]:
        """Interval of a difference-like statistic, per column (NaN where there is none)."""
        return interval(point, boot, g, h, self.method, self.level)

    def rate_interval(
        self, point: F64, boot: F64, n: F64, g: I64 | int, h: I64 | int
    ) -> tuple[F64, F64]:
        """Interval of a rate (a proportion of ``n`` rows), per column."""
        return rate_interval(point, boot, n, g, h, self.method, self.level)

    def effect(self, point: float, boot: F64, g: int, h: int, n: int) -> dict[str, Any]:
        """One difference-like statistic a verdict may read, as JSON: its reported
        interval (``level``) and the interval the verdict rules read
        (``decision_level``), from the same replicates ``boot`` (shape (B,))."""
        p = np.array([point], dtype=np.float64)
        b = np.asarray(boot, dtype=np.float64).reshape(-1, 1)
        lo, hi = interval(p, b, g, h, self.method, self.level)
        d_lo, d_hi = interval(p, b, g, h, self.method, self.decision_level)
        est = estimate(point, lo[0], hi[0], n)
        if est.has_interval:
            est = replace(est, decision_low=as_float(d_lo[0]), decision_high=as_float(d_hi[0]))
        return est.to_json()


def _finite_boot(boot: F64) -> tuple[F64, npt.NDArray[np.bool_]]:
    """Replicates with non-finite values as NaN, and which columns are defined enough."""
    finite = np.isfinite(boot)
    ok = finite.mean(axis=0) >= 0.5 if boot.shape[0] else np.zeros(boot.shape[1:], dtype=bool)
    return np.where(finite, boot, np.nan), ok


def _spread(boot: F64, g: F64, h: F64) -> F64:
    """Bootstrap SD inflated by sqrt(G / (G - H)); NaN where undefined."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns: NaN, reported
        sd = (
            np.nanstd(boot, axis=0, ddof=1)
            if boot.shape[0] > 1
            else np.full(boot.shape[1:], np.nan)
        )
        inflate = np.sqrt(np.where(g > h, g / np.maximum(g - h, 1), np.nan))
    return np.asarray(sd * inflate, dtype=np.float64)


def t_quantile(df: F64 | float, level: float = LEVEL) -> F64:
    """Two-sided t quantile with ``df`` degrees of freedom (NaN where df < 1)."""
    df_arr = np.asarray(df, dtype=np.float64)
    q = stats.t.ppf(0.5 + level / 2.0, np.maximum(df_arr, 1.0))
    return np.asarray(np.where(df_arr >= 1, q, np.nan), dtype=np.float64)


def _prepare(
    point: F64, boot: F64, g: I64 | int, h: I64 | int
) -> tuple[F64, F64, npt.NDArray[np.bool_], F64, F64]:
    """Arrays of one shape: point, replicates (NaN where undefined), which columns are
    defined enough, and G and H per column."""
    point = np.asarray(point, dtype=np.float64)
    g_arr = np.broadcast_to(np.asarray(g, dtype=np.float64), point.shape)
    h_arr = np.broadcast_to(np.asarray(h, dtype=np.float64), point.shape)
    raw = np.asarray(boot, dtype=np.float64)
    # reshape(-1, ...) is ambiguous when there are no columns (a breakdown with no groups)
    reps = raw.shape[0] if point.size == 0 and raw.ndim else -1
    boot, ok = _finite_boot(raw.reshape(reps, *point.shape))
    return point, boot, ok, g_arr, h_arr


def interval(
    point: F64,
    boot: F64,
    g: I64 | int,
    h: I64 | int,
    method: str = DEFAULT_METHOD,
    level: float = LEVEL,
) -> tuple[F64, F64]:
    """(low, high) per column for a difference-like statistic."""
    point, boot, ok, g_arr, h_arr = _prepare(point, boot, g, h)
    valid = ok & np.isfinite(point) & (g_arr >= 2)
    with np.errstate(all="ignore"):
        if method == "percentile":
            alpha = (1.0 - level) / 2.0
            filled = np.where(valid, boot, 0.0)
            lo = np.nanquantile(filled, alpha, axis=0) if boot.shape[0] else point * np.nan
            hi = np.nanquantile(filled, 1.0 - alpha, axis=0) if boot.shape[0] else point * np.nan
        else:
            se = _spread(boot, g_arr, h_arr)
            q = t_quantile(g_arr - h_arr, level)
            lo, hi = point - q * se, point + q * se
        varies = (hi - lo) > 1e-12
    bad = ~(valid & varies)
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def rate_interval(
    point: F64,
    boot: F64,
    n: F64,
    g: I64 | int,
    h: I64 | int,
    method: str = DEFAULT_METHOD,
    level: float = LEVEL,
) -> tuple[F64, F64]:
    """(low, high) per column for a rate: Wilson with the clustering's effective size."""
    if method == "percentile":
        return interval(point, boot, g, h, method, level)
    point, boot, ok, g_arr, h_arr = _prepare(point, boot, g, h)
    n_arr = np.broadcast_to(np.asarray(n, dtype=np.float64), point.shape)
    with np.errstate(all="ignore"):
        se = _spread(boot, g_arr, h_arr)
        var = point * (1.0 - point)
        n_eff = np.where((se > 0) & (var > 0), var / se**2, np.minimum(g_arr, n_arr))
        n_eff = np.clip(n_eff, 1.0, np.maximum(n_arr, 1.0))
        z = t_quantile(g_arr - h_arr, level)
        z2 = z * z
        denom = 1.0 + z2 / n_eff
        centre = (point + z2 / (2.0 * n_eff)) / denom
        half = z * np.sqrt(var / n_eff + z2 / (4.0 * n_eff**2)) / denom
        lo, hi = np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)
    bad = ~(ok & np.isfinite(point) & (g_arr >= 2) & (n_arr > 0))
    return np.where(bad, np.nan, lo), np.where(bad, np.nan, hi)


def standard_error(boot: F64, g: I64 | int, h: I64 | int) -> F64:
    """The inflated bootstrap SE the ``t`` intervals use (for power and tests)."""
    boot = np.asarray(boot, dtype=np.float64)
    shape = boot.shape[1:]
    g_arr = np.broadcast_to(np.asarray(g, dtype=np.float64), shape)
    h_arr = np.broadcast_to(np.asarray(h, dtype=np.float64), shape)
    finite, _ = _finite_boot(boot)
    return _spread(finite, g_arr, h_arr)


def as_float(x: float | np.floating[Any] | None) -> float | None:
    """JSON-safe float: NaN/inf/None become None."""
    if x is None:
        return None
    value = float(x)
    return value if np.isfinite(value) else None


def estimate(
    point: float, lo: float, hi: float, n: int, not_estimable: str | None = None
) -> Estimate:
    """An :class:`Estimate` (summary.json's own type); a missing value says why
    (``not_estimable``), and so does a missing interval on a present value
    (``no_interval``); ``not_estimable`` is the reason to give."""
    value = as_float(point)
    low, high = as_float(lo), as_float(hi)
    if value is None:
        return Estimate(None, low, high, int(n), not_estimable or "undefined on these rows")
    if (low is None or high is None) and not_estimable is None:
        not_estimable = "too few prompts, or no variation between prompts"
    return Estimate(value, low, high, int(n), no_interval=not_estimable)
