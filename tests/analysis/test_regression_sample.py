"""The logistic model's sample of whole prompts (above REGRESSION_MAX_ROWS rows).

The sample is drawn before any row is copied (issue 35: the model's rows are bounded,
not the judged rows); the fit on it must be the fit on the prompts it chose.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tokenlens.analysis import gap as gap_module
from tokenlens.analysis.bootstrap import prompt_keys
from tokenlens.analysis.decompose import lang_code
from tokenlens.analysis.gap import regression
from tokenlens.testing import SCENARIOS, simulate_study


def test_the_sampled_fit_is_the_fit_on_the_chosen_prompts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frame = simulate_study(SCENARIOS["h2"], n_pairs=40, seed=3).frame()
    rows = frame["judged"].to_numpy(dtype=bool)
    keep = rows & (lang_code(frame) >= 0)
    bound = int(keep.sum()) // 2
    monkeypatch.setattr(gap_module, "REGRESSION_MAX_ROWS", bound)
    sampled = regression(frame, "script", rows, 5, seed=11)
    assert sampled["sampled"] and sampled["rows"] < keep.sum()
    # the prompts the documented rule chooses: a seeded draw among the judged prompts
    keys = prompt_keys(frame)
    cluster, uniques = pd.factorize(keys[keep])
    rng = np.random.default_rng(11)
    size = max(2, int(len(uniques) * bound / keep.sum()))
    chosen = uniques[rng.choice(np.unique(cluster), size=size, replace=False)]
    monkeypatch.setattr(gap_module, "REGRESSION_MAX_ROWS", 10**9)
    whole = regression(frame, "script", rows & np.isin(keys, chosen), 5, seed=11)
    assert not whole["sampled"]
    assert (sampled["rows"], sampled["requests"]) == (whole["rows"], whole["requests"])
    assert sampled["terms"].keys() == whole["terms"].keys()
    for name, term in sampled["terms"].items():
        assert term["coef"] == whole["terms"][name]["coef"], name
        assert term["se"] == pytest.approx(whole["terms"][name]["se"], rel=1e-9), name
