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
