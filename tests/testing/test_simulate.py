"""The planted mechanisms, recovered straight from the simulated data (not via the estimator)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from tests.testing.real_figures import REAL_FIGURES
from tokenlens.testing.calibration import (
    figures,
    mean_figures,
    observed,
    study_observed,
)
from tokenlens.testing.scenarios import SCENARIOS, Scenario
from tokenlens.testing.simulate import RunSpec, Study, simulate_study

REPO = Path(__file__).resolve().parents[2]

BINS = np.array([0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99])


@pytest.fixture(scope="module")
def big() -> dict[str, Study]:
    """1,500 pairs of each scenario the mechanism tests read."""
    return {name: simulate_study(SCENARIOS[name], 1500, seed=5) for name in ("null", "h1", "h2")}


def _inside(study: Study) -> np.ndarray:
    """Mask of the (request, position) cells that are part of the output (position >= 1)."""
    cols = np.arange(study.q.shape[1])[None, :]
    return (cols >= 1) & (cols < study.length[:, None])


def _by_conf(study: Study, values: np.ndarray, lang: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean of ``values`` per confidence bin, and the counts, for ``lang``'s output cells."""
    cells = _inside(study) & (study.langs == lang)[:, None]
    b = np.digitize(study.q[cells], BINS)
    n = np.bincount(b, minlength=len(BINS) + 1)
    s = np.bincount(b, weights=values[cells].astype(float), minlength=len(BINS) + 1)
    return s / np.maximum(n, 1), n


def _conf_gap(study: Study, values: np.ndarray) -> tuple[float, float]:
    """JA - EN at equal confidence (bins weighted by JA's cells), and its binomial SE."""
    ja, n_ja = _by_conf(study, values, "ja")
    en, n_en = _by_conf(study, values, "en")
    w = n_ja / n_ja.sum()
    ok = (n_ja > 0) & (n_en > 0)
    diff = float((w[ok] * (ja[ok] - en[ok])).sum())
    var = w**2 * (ja * (1 - ja) / np.maximum(n_ja, 1) + en * (1 - en) / np.maximum(n_en, 1))
    return diff, float(np.sqrt(var[ok].sum()))


def test_runs_share_outputs_and_confidence() -> None:
    study = simulate_study(SCENARIOS["h1"], 20, seed=2)
    f = study.frame()
    f = f[f["output_index"] >= 0]
    keyed = f.groupby(["run", "request_id", "output_index"], observed=True)["top1_prob"].first()
    both = keyed.unstack("run").dropna()
    assert len(both) > 500
    assert (both.iloc[:, 0] == both.iloc[:, 1]).all()


def test_null_japanese_text_is_as_predictable_as_english(big: dict[str, Study]) -> None:
    s = big["null"]
    inside = _inside(s)
    ja = s.q[inside & (s.langs == "ja")[:, None]]
    en = s.q[inside & (s.langs == "en")[:, None]]
    assert (
        np.abs(
            np.quantile(ja, [0.1, 0.25, 0.5, 0.75]) - np.quantile(en, [0.1, 0.25, 0.5, 0.75])
        ).max()
        < 0.03
    )


def test_h1_lowers_confidence_through_the_text(big: dict[str, Study]) -> None:
    """Japanese is less confident, and only through the tokens' feature score."""
    s = big["h1"]
    inside = _inside(s)
    ja_cells = inside & (s.langs == "ja")[:, None]
    en_cells = inside & (s.langs == "en")[:, None]
    assert np.median(s.q[ja_cells]) < np.median(s.q[en_cells]) - 0.1
    assert s.score[ja_cells].mean() < s.score[en_cells].mean() - 1.0
    # at equal text score, the two languages' confidence has the same distribution
    edges = np.quantile(s.score[en_cells], [0.2, 0.4, 0.6, 0.8])
    for lo, hi in itertools.pairwise(edges):
        a = s.q[ja_cells & (s.score >= lo) & (s.score < hi)]
        b = s.q[en_cells & (s.score >= lo) & (s.score < hi)]
        assert abs(np.median(a) - np.median(b)) < 0.04


@pytest.mark.parametrize("name", ["null", "h1"])
def test_agreement_depends_on_confidence_alike_for_both_languages(
    big: dict[str, Study], name: str
) -> None:
    for run in big[name].runs:
        diff, se = _conf_gap(big[name], run.agree)
        assert abs(diff) < 4 * se + 0.005, (run.spec.label, diff, se)


def test_h2_lowers_trained_agreement_at_equal_confidence(big: dict[str, Study]) -> None:
    s = big["h2"]
    trained, _ = _conf_gap(s, s.run("draft_model-k3").agree)
    ngram, se = _conf_gap(s, s.run("ngram-k3").agree)
    assert trained < -0.08
    assert abs(ngram) < 4 * se + 0.005


def test_ngram_drafts_only_where_it_offers() -> None:
    s = simulate_study(SCENARIOS["null"], 40, seed=3)
    run = s.run("ngram-k3")
    ev = run.events
    first = ev.position == 0
    assert run.offer[ev.request[first], ev.index[first]].all()
    cells = _inside(s)
    assert 0.4 < run.offer[cells].mean() < 0.6
    assert s.run("draft_model-k3").offer.all()


def _shift(study: Study, label: str) -> np.ndarray:
    """Per request: the agreement shift implied by p = base ** exp(-shift) (constant in t)."""
    run = study.run(label)
    d = study.scenario.drafter(run.spec.method)
    base = d.ceiling * study.q[:, 1] ** d.power
    p = run.agree_prob[:, 1]
    return np.log(-np.log(base)) - np.log(-np.log(p))


def test_prompt_effects_are_shared_request_effects_are_not() -> None:
    sc = SCENARIOS["null"]
    runs = [RunSpec("dm1", "draft_model", 1), RunSpec("dm3", "draft_model", 3)]
    s = simulate_study(sc, 1500, seed=4, runs=[*runs, RunSpec("ng3", "ngram", 3)])
    a, b, c = (_shift(s, x) for x in ("dm1", "dm3", "ng3"))
    d = sc.drafter("draft_model")
    # the same drafter on the same prompts: shared prompt effect, request effects differ
    assert np.std(a - b) == pytest.approx(np.sqrt(2) * d.request_sd, rel=0.1)
    want = d.prompt_sd**2 / (d.prompt_sd**2 + d.request_sd**2)
    assert np.corrcoef(a, b)[0, 1] == pytest.approx(want, abs=0.03)
    # across drafters only the shared component correlates
    n = sc.drafter("ngram")
    shared = np.sqrt(d.shared * n.shared) * d.prompt_sd * n.prompt_sd
    want_dn = shared / np.sqrt(
        (d.prompt_sd**2 + d.request_sd**2) * (n.prompt_sd**2 + n.request_sd**2)
    )
    assert np.corrcoef(a, c)[0, 1] == pytest.approx(want_dn, abs=0.05)


def test_same_seed_same_study_and_counterfactuals_keep_english() -> None:
    sc = SCENARIOS["h1"]
    a, b = simulate_study(sc, 10, seed=9), simulate_study(sc, 10, seed=9)
    assert a.frame().equals(b.frame())
    assert not a.frame().equals(simulate_study(sc, 10, seed=10).frame())
    cf = simulate_study(sc.with_confidence(ja_strength=0.0), 10, seed=9)
    en = a.langs == "en"
    assert np.array_equal(a.q[en], cf.q[en]) and not np.array_equal(a.q[~en], cf.q[~en])
    assert np.array_equal(a.tokens, cf.tokens)
    for r, c in zip(a.runs, cf.runs, strict=True):
        assert np.array_equal(r.agree[en], c.agree[en])


def test_counters_are_vllms_definitions() -> None:
    s = simulate_study(SCENARIOS["null"], 8, seed=1)
    for run in s.runs:
        c = run.counters()
        ev = run.events
        assert c["num_draft_tokens"] == len(ev)
        assert c["num_accepted_tokens"] == ev.accepted.sum()
        assert c["num_drafts"] == len(set(zip(ev.request.tolist(), ev.step.tolist(), strict=True)))
        assert c["accepted_per_position"] == [
            int(ev.accepted[ev.position == p].sum()) for p in range(run.spec.k)
        ]


CALIBRATED = (
    "acceptance",
    "judged_acceptance",
    "a0",
    "a1",
    "a2",
    "prompt_sd",
    "resid_sd",
    "pair_corr",
    "judged_per_request",
    "length",
    "offer_rate",
    "q25",
    "q50",
)
# q75 and above are not checked: both saturate near 1 (real 0.995-0.998, simulated
# 0.987-0.994) with simulated SDs of 0.001-0.002, so a 0.005 miss is "5 SD".
KNOWN_MISSES = {
    # The test bed has one n-gram offer rate for both languages; the real n-gram drafter
    # offers a little more often on Japanese (0.55 vs 0.52). Measured z ~ +3.5.
    "ngram/ja/offer_rate",
}
"""Figures the test bed is known not to reproduce within 3 SD (docs/analysis.md,
"Calibration of the test bed")."""


@pytest.mark.parametrize("scenario", ["measured", "null"])
def test_calibrated_to_the_real_traces(scenario: str) -> None:
    """Studies of the calibration design reproduce the real figures.

    The design is the verdict-grade study's (``reports/full``: 60 JA/EN pairs, 128
    output tokens). Each real figure must lie within 3 simulated standard deviations of
    the simulated mean (30 studies). ``measured`` must match both languages; the
    standard scenarios (``null`` here) share its English side up to the text weights.
    """
    sc: Scenario = SCENARIOS[scenario]
    sims = [figures(*study_observed(simulate_study(sc, 60, seed=s))) for s in range(30)]
    mean = mean_figures(sims)
    bad = {}
    checked = 0
    for key, real in REAL_FIGURES.items():
        if key.split("/")[-1] not in CALIBRATED or (scenario != "measured" and "/ja/" in key):
            continue
        if key in KNOWN_MISSES:
            continue
        checked += 1
        sd = float(np.std([s[key] for s in sims]))
        if abs(real - mean[key]) > 3 * sd + 1e-9:
            bad[key] = (real, round(mean[key], 3), round(sd, 3))
    assert checked >= (40 if scenario == "measured" else 20)
    assert not bad


def test_real_figures_are_the_committed_study() -> None:
    """REAL_FIGURES is what the calibration figures give on the committed full study."""
    runs = [REPO / "reports" / "full" / "runs" / name for name in ("draft_model-k3", "ngram-k3")]
    real = figures(*observed(runs))
    for key, value in REAL_FIGURES.items():
        assert real[key] == pytest.approx(value, abs=6e-5), key
