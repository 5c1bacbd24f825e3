"""Each part of the estimator pinned on small hand-built frames.

Null handling, the three-way split summing to the gap, prompt-paired resampling shared
across runs, the symmetric verdict rules, non-collapsing rate intervals, the drafter
contrast, Holm's adjustment and the power formula.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tokenlens.analysis.bootstrap import Resampler, rate_interval
from tokenlens.analysis.breakdown import per_lang
from tokenlens.analysis.decompose import Support, decompose, did
from tokenlens.analysis.explore import holm
from tokenlens.analysis.parts import compute_parts
from tokenlens.analysis.power import effect_power
from tokenlens.analysis.rules import (
    INCONCLUSIVE,
    NA,
    NO,
    NO_DEFICIT,
    NOT_SUPPORTED,
    SUPPORTED,
    UNSURE,
    YES,
    Rules,
    combine,
    conjoin,
    tri,
)
from tokenlens.analysis.verdicts import _rule, decide


def frame_of(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Judged draft rows: defaults fill what a test does not care about."""
    base = {"run": "r", "method": "draft_model", "k": 1, "step": 0, "position": 0}
    out = pd.DataFrame([{**base, **r} for r in rows])
    out["judged"] = True
    out["request_id"] = out["prompt_id"]
    return out


def block(
    lang: str, prompt: str, cls: int, accepted: int, rejected: int, **extra: Any
) -> list[dict[str, Any]]:
    row = {"lang": lang, "prompt_id": prompt, "pair": prompt[-1], "cls": cls, **extra}
    return [{**row, "accepted": True}] * accepted + [{**row, "accepted": False}] * rejected


def test_resampler_pairs_prompts_and_shares_weights_across_runs() -> None:
    rows = []
    for run in ("ngram", "dm"):
        for i in range(4):
            rows += block("ja", f"ja{i}", 0, 1, 1, run=run) + block(
                "en", f"en{i}", 0, 1, 1, run=run
            )
    frame = frame_of(rows)
    rs = Resampler.from_frame(frame, n_boot=200, seed=1)
    assert rs.unit == "prompt pair" and rs.n_clusters == 4
    # The same prompt in both runs, and both halves of a pair, share one cluster.
    ja0 = frame.index[(frame["prompt_id"] == "ja0")]
    en0 = frame.index[(frame["prompt_id"] == "en0")]
    assert len(set(rs.cluster[ja0]) | set(rs.cluster[en0])) == 1
    assert (rs.weights.sum(axis=1) == 4).all()

    unpaired = frame.assign(pair="")
    rs2 = Resampler.from_frame(unpaired, n_boot=200, seed=1)
    assert rs2.unit.startswith("prompt (stratified") and rs2.n_clusters == 8
    ja = np.unique(rs2.cluster[(unpaired["lang"] == "ja").to_numpy()])
    # Stratified by language: every replicate keeps 4 Japanese prompts.
    assert (rs2.weights[:, ja].sum(axis=1) == 4).all()
    # Prompt clusters are shared by the runs too (8, not 16).
    assert len(np.unique(rs2.cluster)) == 8


def _two_class_frame(
    ja: list[tuple[int, int, int]], en: list[tuple[int, int, int]], prompts: int
) -> pd.DataFrame:
    """(class, accepted, rejected) per prompt, repeated over ``prompts`` prompt pairs."""
    rows: list[dict[str, Any]] = []
    for i in range(prompts):
        for cls, a, r in ja:
            rows += block("ja", f"ja{i}", cls, a + (i % 2), r)
        for cls, a, r in en:
            rows += block("en", f"en{i}", cls, a, r + (i % 3 == 0))
    return frame_of(rows)


def test_three_way_split_sums_to_the_gap_and_reports_out_of_support() -> None:
    # Class 0 both languages fill, class 1 only Japanese (a kanji-like class).
    frame = _two_class_frame([(0, 6, 4), (1, 2, 8)], [(0, 8, 2)], prompts=8)
    rs = Resampler.from_frame(frame, 300, 0)
    codes = frame["cls"].to_numpy(dtype=np.int64)
    dec = decompose(frame, rs, codes, ["c0", "c1"], np.ones(len(frame), bool), Support(), "cls")
    assert dec is not None and "not_estimable" not in dec
    total = sum(dec[p]["value"] for p in ("composition", "within", "out_of_support"))
    assert total == pytest.approx(dec["gap"]["value"])
    # One in-support class: composition is exactly zero, everything else is within or out.
    assert dec["composition"]["value"] == pytest.approx(0.0)
    ja_rate = frame.query("lang == 'ja'")["accepted"].mean()
    en_rate = frame.query("lang == 'en'")["accepted"].mean()
    assert dec["gap"]["value"] == pytest.approx(ja_rate - en_rate)
    ja0 = frame.query("lang == 'ja' and cls == 0")["accepted"].mean()
    assert dec["within"]["value"] == pytest.approx(ja0 - en_rate)
    assert dec["support"]["share_en"] == 1.0 and dec["support"]["share_ja"] == pytest.approx(0.5)


def test_too_little_support_is_null_with_a_reason_not_zero() -> None:
    # Japanese mostly in a class English lacks: shared rows cover 20% of Japanese.
    frame = _two_class_frame([(0, 1, 1), (1, 4, 4)], [(0, 5, 5)], prompts=8)
    rs = Resampler.from_frame(frame, 200, 0)
    codes = frame["cls"].to_numpy(dtype=np.int64)
    dec = decompose(frame, rs, codes, ["c0", "c1"], np.ones(len(frame), bool), Support(), "cls")
    assert dec is not None
    for part in ("composition", "within", "out_of_support"):
        assert dec[part]["value"] is None and dec[part]["ci_low"] is None
        assert "cover" in dec[part]["not_estimable"]
    assert dec["gap"]["value"] is not None  # the gap itself is still estimable
    assert tri(dec["composition"], 0.02) == NA


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(1, 9), st.integers(1, 9), st.booleans()),
        min_size=4,
        max_size=24,
    )
)
def test_split_is_exact_in_every_replicate(cells: list[tuple[int, int, int, bool]]) -> None:
    """Composition + within + out-of-support = the gap, in the point estimate and in every
    bootstrap replicate. Out-of-support is the residual of the gap, so the sum holds by
    construction; what can fail is that the residual equals the out-of-support classes'
    own contributions, and each part the sum of its per-class terms."""
    from tokenlens.analysis import decompose as module

    rows: list[dict[str, Any]] = []
    for i, (cls, a, r, ja) in enumerate(cells):
        for lang in ("ja", "en") if ja else ("en",):
            rows += block(lang, f"{lang}{i}", cls, a, r)
    rows += block("ja", "jaX", 0, 3, 3) + block("en", "enX", 0, 3, 3)
    frame = frame_of(rows)
    rs = Resampler.from_frame(frame, 50, 3)
    codes = frame["cls"].to_numpy(dtype=np.int64)
    estimated: list[tuple[np.ndarray, np.ndarray]] = []  # (point, replicates) of every part
    real = module._est

    def keep(point: np.ndarray, boot: np.ndarray, *args: Any) -> Any:
        estimated.append((point, boot))
        return real(point, boot, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "_est", keep)
        dec = decompose(
            frame, rs, codes, ["a", "b", "c"], np.ones(len(frame), bool), Support(1, 1, 0.0), "cls"
        )
    assert dec is not None
    # Class 0 always has rows of both languages (jaX, enX) and no share is required.
    parts = [dec[p]["value"] for p in ("composition", "within", "out_of_support")]
    assert None not in parts
    assert sum(parts) == pytest.approx(dec["gap"]["value"], abs=1e-12)
    point, boot = estimated[0]
    k = 3
    assert np.isfinite(point[:4]).all()
    for values in (point[None, :], boot):
        # A replicate that drew no row of a language, or of a shared class in one
        # language, estimates nothing (NaN); every other one must add up exactly.
        ok = np.isfinite(values[:, :4]).all(axis=1)
        gap, comp, within, out = (values[ok, i] for i in range(4))
        per_class = [values[ok, 4 + j * k : 4 + (j + 1) * k].sum(axis=1) for j in range(3)]
        np.testing.assert_allclose(comp, per_class[0], atol=1e-12)
        np.testing.assert_allclose(within, per_class[1], atol=1e-12)
        np.testing.assert_allclose(out, per_class[2], atol=1e-12)
        np.testing.assert_allclose(comp + within + out, gap, atol=1e-12)


def test_tri_never_reads_a_null_or_zero_width_interval() -> None:
    assert tri({"value": 0.0, "ci_low": 0.0, "ci_high": 0.0}, 0.02) == NA
    assert tri({"value": None, "ci_low": None, "ci_high": None}, 0.02) == NA
    assert tri({"value": -0.1, "ci_low": -0.15, "ci_high": -0.05}, 0.02) == YES
    assert tri({"value": 0.0, "ci_low": -0.01, "ci_high": 0.01}, 0.02) == NO
    assert tri({"value": -0.02, "ci_low": -0.05, "ci_high": 0.01}, 0.02) == UNSURE


def test_tri_reads_the_decision_interval_not_the_reported_one() -> None:
    # The 95% interval straddles -delta; the 90% decision interval clears it.
    effect = {
        "value": -0.06,
        "ci_low": -0.10,
        "ci_high": -0.01,
        "decision_low": -0.09,
        "decision_high": -0.03,
    }
    assert tri(effect, 0.02) == YES
    assert tri({**effect, "decision_high": -0.015}, 0.02) == UNSURE
    # A figure whose decision interval is missing is not read at all.
    assert tri({**effect, "decision_low": None, "decision_high": None}, 0.02) == NA


def test_the_decision_interval_is_the_1_minus_2_alpha_interval_of_the_same_replicates() -> None:
    rng = np.random.default_rng(5)
    boot = rng.normal(-0.05, 0.02, size=400)
    rs = Resampler(np.arange(30), np.zeros(30, dtype=np.int64), 10, 0, decision_level=0.90)
    out = rs.effect(-0.05, boot, 30, 1, 1000)
    se = np.std(boot, ddof=1) * np.sqrt(30 / 29)
    assert out["ci_high"] - out["value"] == pytest.approx(stats.t.ppf(0.975, 29) * se)
    assert out["decision_high"] - out["value"] == pytest.approx(stats.t.ppf(0.95, 29) * se)
    assert out["value"] - out["decision_low"] == pytest.approx(stats.t.ppf(0.95, 29) * se)
    # No reported interval, no decision interval either.
    flat = rs.effect(-0.05, np.full(400, -0.05), 30, 1, 1000)
    assert flat["ci_low"] is None and "decision_low" not in flat


def test_rules_record_and_check_their_level() -> None:
    assert Rules().to_json()["alpha"] == pytest.approx(0.05)
    assert Rules().decision_level == pytest.approx(0.90)
    assert Rules(alpha=0.025).decision_level == pytest.approx(0.95)
    with pytest.raises(ValueError, match="alpha"):
        Rules(alpha=0.5)


@pytest.mark.parametrize(
    ("effect", "check", "verdict"),
    [
        (YES, None, SUPPORTED),
        (YES, YES, SUPPORTED),
        (YES, UNSURE, SUPPORTED),
        (YES, NO, INCONCLUSIVE),  # the check vetoes "supported"
        (NO, None, NOT_SUPPORTED),
        (NO, NO, NOT_SUPPORTED),
        (NO, UNSURE, NOT_SUPPORTED),
        (NO, YES, INCONCLUSIVE),  # ... and "not supported"
        (UNSURE, YES, INCONCLUSIVE),
        (NA, YES, INCONCLUSIVE),
    ],
)
def test_rules_are_symmetric(effect: str, check: str | None, verdict: str) -> None:
    assert combine(effect, check) == verdict


@pytest.mark.parametrize(
    ("effect", "check", "verdict"),
    [
        (YES, YES, SUPPORTED),
        (YES, UNSURE, INCONCLUSIVE),  # H2 needs the trained drafter's own gap too
        (YES, NA, INCONCLUSIVE),
        (YES, NO, NOT_SUPPORTED),  # n-gram better on Japanese, trained drafter no gap
        (NO, NO, NOT_SUPPORTED),
        (NO, UNSURE, NOT_SUPPORTED),
        (NO, YES, INCONCLUSIVE),  # a shared deficit: both drafters lose Japanese
        (UNSURE, NO, NOT_SUPPORTED),
        (UNSURE, YES, INCONCLUSIVE),
        (UNSURE, UNSURE, INCONCLUSIVE),
    ],
)
def test_h2_rule_is_the_conjunction(effect: str, check: str, verdict: str) -> None:
    assert conjoin(effect, check) == verdict


def test_rates_at_zero_or_one_get_a_real_interval() -> None:
    rows: list[dict[str, Any]] = []
    for i in range(6):
        rows += block("ja", f"ja{i}", 0, 5, 0) + block("en", f"en{i}", 0, 0, 5)
    frame = frame_of(rows)
    rs = Resampler.from_frame(frame, 200, 0)
    acc = per_lang(frame, rs, np.ones(len(frame), bool), 30)
    assert acc["ja"]["rate"] == 1.0 and acc["en"]["rate"] == 0.0
    assert acc["ja"]["ci_low"] < 0.8 and acc["ja"]["ci_high"] == 1.0
    assert acc["en"]["ci_low"] == 0.0 and acc["en"]["ci_high"] > 0.2
    # Wilson at the clusters' size (6 prompts, t with 5 df) bounds it:
    z = stats.t.ppf(0.975, 5)
    assert acc["en"]["ci_high"] == pytest.approx(z**2 / (6 + z**2))


def test_rate_interval_uses_the_design_effect() -> None:
    # 10 clusters, p = 0.5, bootstrap SE 0.1 -> effective n = 0.25 / (0.01 * 10/9) = 22.5
    boot = np.array([[0.4], [0.6]] * 50)
    lo, hi = rate_interval(np.array([0.5]), boot, np.array([1000.0]), 10, 1)
    sd = np.std(boot[:, 0], ddof=1) * np.sqrt(10 / 9)
    n_eff = 0.25 / sd**2
    z = stats.t.ppf(0.975, 9)
    half = z * np.sqrt(0.25 / n_eff + z**2 / (4 * n_eff**2)) / (1 + z**2 / n_eff)
    assert hi[0] - lo[0] == pytest.approx(2 * half)


def test_drafter_contrast_by_hand() -> None:
    # Two confidence bins; trained: JA 50% vs EN 80% in both; n-gram: JA 30% vs EN 30%.
    rows: list[dict[str, Any]] = []
    for i in range(5):
        for b in (0, 1):
            rows += block("ja", f"ja{i}", b, 5, 5, method="draft_model", run="dm")
            rows += block("en", f"en{i}", b, 8, 2, method="draft_model", run="dm")
            rows += block("ja", f"ja{i}", b, 3, 7, method="ngram", run="ng")
            rows += block("en", f"en{i}", b, 3, 7, method="ngram", run="ng")
    frame = frame_of(rows)
    rs = Resampler.from_frame(frame, 200, 0)
    codes = frame["cls"].to_numpy(dtype=np.int64)
    trained = (frame["method"] == "draft_model").to_numpy()
    out = did(frame, rs, codes, ["b0", "b1"], np.ones(len(frame), bool), trained, Support())
    assert out["within_trained"]["value"] == pytest.approx(-0.3)
    assert out["within_training_free"]["value"] == pytest.approx(0.0)
    assert out["difference"]["value"] == pytest.approx(-0.3)
    # No between-prompt variation at all: no interval rather than a certain zero-width one.
    assert out["difference"]["ci_low"] is None and out["difference"].get("no_interval")

    no_ngram = frame[~(frame["method"] == "ngram")].reset_index(drop=True)
    rs2 = Resampler.from_frame(no_ngram, 50, 0)
    out2 = did(
        no_ngram,
        rs2,
        no_ngram["cls"].to_numpy(dtype=np.int64),
        ["b0", "b1"],
        np.ones(len(no_ngram), bool),
        np.ones(len(no_ngram), bool),
        Support(),
    )
    assert out2["difference"]["value"] is None and "training_free" in out2["not_estimable"]


def test_holm_by_hand() -> None:
    p = np.array([0.01, 0.04, 0.03, np.nan, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 (m = 4): 0.02, 0.03, 0.06, 0.06 (monotone)
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, np.nan, 0.02], nan_ok=True)


def test_power_from_the_interval() -> None:
    rules = Rules(delta=0.02, min_prompts=30, power_effects=(0.1,))
    df = 29
    t975 = stats.t.ppf(0.975, df)
    se = 0.035
    effect = {"value": -0.05, "ci_low": -0.05 - t975 * se, "ci_high": -0.05 + t975 * se}
    out = effect_power(effect, df, rules, n_prompts=30)
    assert out["se"] == pytest.approx(se)
    # Supported needs the 90% decision interval to clear -delta: a one-sided 5% test.
    assert out["mde"] == pytest.approx(0.02 + (stats.t.ppf(0.95, df) + stats.t.ppf(0.8, df)) * se)
    z = stats.norm.ppf(0.95) + stats.norm.ppf(0.8)
    needed = int(np.ceil(30 * (z * se / 0.08) ** 2))
    assert needed > 30  # above the floor of min_prompts, so the formula is what is tested
    assert out["prompts_needed"]["0.1"] == needed


def test_a_japanese_advantage_is_no_deficit_not_a_refutation() -> None:
    rules = Rules()
    ahead = {"value": 0.08, "ci_low": 0.03, "ci_high": 0.13}
    verdict, note = _rule(ahead, NO, None, rules)
    assert verdict == NO_DEFICIT and "no deficit to explain" in note
    behind = {"value": -0.08, "ci_low": -0.13, "ci_high": -0.03}
    assert _rule(behind, NO, None, rules)[0] == NOT_SUPPORTED
    assert _rule(behind, YES, NO, rules) == (INCONCLUSIVE, " The check disagrees with the effect.")
    unsure_gap = {"value": 0.0, "ci_low": -0.05, "ci_high": 0.05}
    assert _rule(unsure_gap, YES, UNSURE, rules)[0] == SUPPORTED


def test_too_few_prompts_is_insufficient_data_whatever_the_numbers() -> None:
    rows: list[dict[str, Any]] = []
    for i in range(4):  # a huge, clean gap from 4 prompts per language
        rows += block("ja", f"ja{i}", 0, 1 + i % 2, 9, top1_prob=0.5 + 0.1 * i)
        rows += block("en", f"en{i}", 0, 9, 1 + i % 2, top1_prob=0.5 + 0.1 * i)
    frame = frame_of(rows)
    rs = Resampler.from_frame(frame, 100, 0)
    parts = compute_parts(frame, rs, Support())
    out = decide(frame, rs, Rules(), parts)
    for h in out.values():
        assert h.verdict == "insufficient_data"
        assert "4 Japanese and 4 English prompts" in str(h.evidence)
