"""Verdicts on studies from the independent test bed (tokenlens.testing).

Each study: a draft-model and an n-gram run on the same N Japanese/English prompt
pairs (k = 3, outputs of up to 96 tokens, prompt and request effects, calibrated to
real traces; see tokenlens/testing/scenarios.py). Each N is chosen from the spread
of the estimands over simulated studies (benchmarks/bench_verdicts.py and
tokenlens.testing.truth) so that the asserted verdict holds in well over 99% of
studies with a correct estimator; a fixed seed is then not a lucky draw:

- a planted 10 pp effect is ``supported`` at N = 60 (H1: composition SD ~1.1 pp) and
  N = 150 (H2: difference-in-differences SD ~1.7 pp);
- ``not_supported`` needs the whole interval above -2 pp, so an absent cause is only
  rejected with many prompts (N = 600); at smaller N it may stay ``inconclusive``,
  which is why the other tests only require "not supported";
- a Japanese advantage of +4 pp gives ``no_japanese_deficit`` at N = 200.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tokenlens.testing import SCENARIOS, RunSpec, simulate_study
from tokenlens.testing.estimator import analyze

N_BOOT = 300


def _verdicts(name: str, n: int, seed: int = 0, **kw: Any) -> dict[str, dict[str, Any]]:
    study = simulate_study(SCENARIOS[name], n, seed=seed, **kw)
    hypotheses: dict[str, dict[str, Any]] = analyze(study, N_BOOT, seed=1)["hypotheses"]
    return hypotheses


def test_null_supports_neither() -> None:
    h = _verdicts("null", 60)
    assert h["H1"]["verdict"] != "supported" and h["H2"]["verdict"] != "supported", h


def test_pure_h1() -> None:
    h = _verdicts("h1", 60)
    assert h["H1"]["verdict"] == "supported", h["H1"]
    assert h["H2"]["verdict"] != "supported", h["H2"]


def test_pure_h2() -> None:
    h = _verdicts("h2", 150)
    assert h["H2"]["verdict"] == "supported", h["H2"]
    assert h["H1"]["verdict"] != "supported", h["H1"]


def test_both() -> None:
    h = _verdicts("h1_h2", 150)
    assert (h["H1"]["verdict"], h["H2"]["verdict"]) == ("supported", "supported"), h


def test_absent_cause_is_rejected_with_enough_prompts() -> None:
    h = _verdicts("h2", 600)
    assert h["H1"]["verdict"] == "not_supported", h["H1"]


def test_japanese_advantage_has_nothing_to_explain() -> None:
    h = _verdicts("ja_advantage", 200)
    assert h["H1"]["verdict"] == h["H2"]["verdict"] == "no_japanese_deficit", h


def test_ngram_better_on_japanese_is_not_h2() -> None:
    """n-gram copying more on Japanese makes the DiD negative although the trained
    drafter has no deficit (the real traces look like this): H2 must not be supported."""
    h = _verdicts("ngram_ja_advantage", 100)
    assert h["H2"]["verdict"] != "supported", h["H2"]


def test_below_min_prompts_is_insufficient_data() -> None:
    h = _verdicts("h1_h2", 10)
    for hyp in ("H1", "H2"):
        assert h[hyp]["verdict"] == "insufficient_data", h[hyp]
        assert "30" in h[hyp]["evidence"]


def test_h2_needs_both_families() -> None:
    sc = SCENARIOS["h1_h2"]
    h = _verdicts("h1_h2", 60, runs=[RunSpec("dm", "draft_model", sc.k)])
    assert h["H2"]["verdict"] == "inconclusive", h["H2"]


def test_without_logprobs_both_are_inconclusive() -> None:
    study = simulate_study(SCENARIOS["h1_h2"], 60, seed=0)
    frame = study.frame()
    frame["top1_prob"] = np.nan
    h = analyze(study, N_BOOT, seed=1, frame=frame)["hypotheses"]
    assert h["H1"]["verdict"] == h["H2"]["verdict"] == "inconclusive", h


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_one_language_decides_nothing(lang: str) -> None:
    study = simulate_study(SCENARIOS["h1_h2"], 60, seed=0)
    frame = study.frame()
    frame = frame[frame["lang"] == lang].reset_index(drop=True)
    h = analyze(study, N_BOOT, seed=1, frame=frame)["hypotheses"]
    for hyp in ("H1", "H2"):
        assert h[hyp]["verdict"] not in ("supported", "not_supported"), h[hyp]
