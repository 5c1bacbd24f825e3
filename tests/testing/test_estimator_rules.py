"""``tokenlens.testing.estimator.supported`` (bench_verdicts' recomputation of the
verdicts from key estimates) says what the analysis itself says."""

from __future__ import annotations

import pytest

from tokenlens.testing import simulate_study
from tokenlens.testing.estimator import analyze, key_estimates, supported
from tokenlens.testing.scenarios import ALL_SCENARIOS


@pytest.mark.parametrize("scenario", ["h1_h2", "null", "h2-16_ngram+20"])
def test_recomputed_verdicts_equal_the_analysis(scenario: str) -> None:
    summary = analyze(simulate_study(ALL_SCENARIOS[scenario], 30, seed=2), 200, seed=3)
    said = supported(key_estimates(summary))
    for h in ("H1", "H2"):
        assert said[h] == (summary["hypotheses"][h]["verdict"] == "supported"), h
    if scenario == "h1_h2":  # planted: the test is not passing on two False values
        assert said["H1"]
    if scenario == "h2-16_ngram+20":  # the control refused: H2 from its bounded reading
        assert summary["h2_contrast"]["control"]["holds"] is False
        assert said["H2"]
