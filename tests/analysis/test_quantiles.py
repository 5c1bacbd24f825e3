"""Quantiles from order statistics (:mod:`tokenlens.analysis.quantiles`) equal numpy's,
bit for bit: what lets a query engine's ranks give the analysis' confidence bins."""

from __future__ import annotations

import numpy as np
import pytest

from tokenlens.analysis.decompose import CONF_BINS
from tokenlens.analysis.quantiles import linear_quantiles, quantile_ranks


@pytest.mark.parametrize("n", [1, 2, 3, 7, 20, 21, 99, 1000, 17_431])
def test_equal_to_numpy_bit_for_bit(n: int) -> None:
    rng = np.random.default_rng(n)
    qs = np.linspace(0.0, 1.0, CONF_BINS + 1)
    samples = [
        rng.random(n),  # distinct values
        np.round(rng.random(n), 2),  # ties
        rng.beta(0.3, 0.3, n) ** 3,  # mass near 0 and 1, tiny values
        np.full(n, 0.1),  # one value
    ]
    for values in samples:
        ordered = np.sort(values)
        got = linear_quantiles(n, qs, lambda ranks, v=ordered: v[ranks])
        want = np.quantile(values, qs)
        assert got.tobytes() == want.tobytes()  # every bit, not approximately
    odd = np.array([0.0, 0.013, 0.25, 0.5, 0.999, 1.0, 1 / 3, 2 / 3])
    ordered = np.sort(samples[0])
    got = linear_quantiles(n, odd, lambda ranks: ordered[ranks])
    assert got.tobytes() == np.quantile(samples[0], odd).tobytes()


def test_ranks_stay_inside_the_values() -> None:
    previous, following, gamma = quantile_ranks(5, np.array([0.0, 0.5, 0.99, 1.0]))
    assert previous.tolist() == [0, 2, 3, 4] and following.tolist() == [1, 3, 4, 4]
    assert gamma[0] == 0.0 and gamma[1] == 0.0
    with pytest.raises(ValueError, match="no values"):
        quantile_ranks(0, np.array([0.5]))


@pytest.mark.parametrize("kind", ["distinct", "ties near 1", "one value", "few rows"])
def test_a_query_engine_finds_the_same_edges(kind: str) -> None:
    """The confidence bins' edges from DuckDB's two grouped queries
    (:func:`~tokenlens.analysis.request_bins.confidence_edges`) equal the analysis' own
    (``np.unique(np.quantile(...))``) bit for bit, NaN, infinities and rows that are not
    judged or have no classes left out as the analysis leaves them."""
    duckdb = pytest.importorskip("duckdb")
    import pyarrow as pa

    from tokenlens.analysis.decompose import bin_quantiles
    from tokenlens.analysis.request_bins import confidence_edges

    rng = np.random.default_rng(7)
    n = 3 if kind == "few rows" else 50_000
    values = {
        "distinct": rng.random(n),
        "ties near 1": np.where(
            rng.random(n) < 0.6,
            np.float32(1.0) - np.float32(2**-24) * rng.integers(0, 4, n),
            rng.random(n) ** 0.2,
        ).astype(np.float64),
        "one value": np.full(n, 0.25),
        "few rows": np.array([0.5, 0.125, 0.75]),
    }[kind]
    noise = np.array([np.nan, np.inf, -np.inf, 0.3, 0.9])  # out: non-finite, or not judged
    top1 = np.concatenate([values, noise])
    judged = np.concatenate([np.ones(len(values), bool), [True, True, True, False, True]])
    script = [*["Latin"] * len(values), "Latin", "Latin", "Latin", "Latin", None]
    tokens = pa.table({"top1_prob": top1, "judged": judged, "script": script})
    con = duckdb.connect()
    con.register("tokens", tokens)
    got = confidence_edges(lambda sql: con.sql(sql).to_arrow_table())
    want = np.unique(np.quantile(values, bin_quantiles()))
    assert got is not None and got.tobytes() == want.tobytes()
    con.close()
