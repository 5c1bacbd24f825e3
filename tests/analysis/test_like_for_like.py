"""Issue 30: like-for-like class contrasts, the length-standardised gap, H2's control
checked before it is used, δ in speed terms and no figure pooled over k unlabelled.

Each on hand-built or simulated data, against a hand computation or the planted truth.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tokenlens.analysis.bootstrap import Resampler
from tokenlens.analysis.classes import COMPARED, PER_LANGUAGE, class_table
from tokenlens.analysis.comparable import PER_LANGUAGE as TABLE
from tokenlens.analysis.comparable import not_comparable
from tokenlens.analysis.decompose import Support, decompose
from tokenlens.analysis.explore import class_differences
from tokenlens.analysis.parts import families
from tokenlens.analysis.rules import apply_control, control_holds
from tokenlens.analysis.speed import iid_tokens_per_step, margin_in_speed
from tokenlens.analysis.standardise import length_standardised
from tokenlens.testing import simulate_study
from tokenlens.testing.estimator import analyze
from tokenlens.testing.scenarios import ALL_SCENARIOS

# (lang, class, n_bytes, rows per prompt, accepted per prompt): two strata per language
CELLS = (
    ("ja", "kana", 1, 10, 8),  # r_ja,1 = 0.8
    ("ja", "mixed", 3, 30, 12),  # r_ja,3 = 0.4
    ("en", "kana", 1, 20, 18),  # r_en,1 = 0.9
    ("en", "mixed", 3, 10, 6),  # r_en,3 = 0.6
)


def hand_frame(pairs: int = 6) -> pd.DataFrame:
    """``pairs`` translation pairs, every prompt with the rows of :data:`CELLS`: class
    ``mixed`` (3-byte tokens) and ``kana`` (1-byte) in both languages, the same token
    string ``x`` in each class, one judged row per token."""
    rows = []
    for pair in range(pairs):
        for lang, cls, n_bytes, n, accepted in CELLS:
            for i in range(n):
                rows.append(
                    {
                        "run": "dm",
                        "method": "draft_model",
                        "k": 3,
                        "request_id": f"p{pair}-{lang}",
                        "prompt_id": f"p{pair}-{lang}",
                        "lang": lang,
                        "pair": f"p{pair}",
                        "accepted": i < accepted,
                        "judged": True,
                        "position": 0,
                        "script": cls,
                        "token_text": f"{cls}-token",
                        "n_bytes": n_bytes,
                    }
                )
    return pd.DataFrame(rows)


def test_the_table_is_the_one_place_and_names_what_each_language_puts_there() -> None:
    assert not_comparable("boundary", "spans") and not_comparable("script", "mixed")
    assert not_comparable("script", "digit") is None and not_comparable("boundary", "same") is None
    assert not_comparable(None, "mixed") is None
    for column, classes in TABLE.items():
        for label, why in classes.items():
            assert "Japanese" in why and "English" in why, (column, label)


def test_a_class_whose_tokens_differ_in_kind_is_shown_per_language_not_contrasted() -> None:
    frame = hand_frame()
    rs = Resampler.from_frame(frame, 200, 0)
    rows = np.ones(len(frame), dtype=bool)
    table = class_table(frame, rs, rows, "script", Support(), 30)
    by = {c["class"]: c for c in table.to_json()["classes"]}
    # both languages fill both classes; "mixed" is listed as differing in kind
    assert by["mixed"]["status"] == PER_LANGUAGE and "difference" not in by["mixed"]
    assert "differ in kind" in by["mixed"]["not_contrasted"]
    assert by["mixed"]["rate_ja"]["rate"] == pytest.approx(0.4)  # still shown per language
    assert by["mixed"]["rate_en"]["rate"] == pytest.approx(0.6)
    assert by["kana"]["status"] == COMPARED and "not_contrasted" not in by["kana"]
    assert by["kana"]["difference"]["value"] == pytest.approx(0.8 - 0.9)
    assert table.comparisons == 1  # Holm's family holds the contrasted class only
    assert by["kana"]["shared_tokens"] == {"ja": 1.0, "en": 1.0}
    # the exploratory search skips it, and the decomposition counts it out of support
    found = class_differences(frame, rs, families(frame), rows, Support(), 30)
    assert {c["class"] for c in found["classes"] if c["by"] == "script"} == {"kana"}
    codes = np.where(frame["script"].to_numpy() == "kana", 0, 1).astype(np.int64)
    dec = decompose(frame, rs, codes, ["kana", "mixed"], rows, Support(), "script")
    assert dec is not None
    assert [c["shared"] for c in dec["classes"]] == [True, False]


def test_the_length_standardised_gap_equals_a_hand_computation() -> None:
    frame = hand_frame()
    rs = Resampler.from_frame(frame, 200, 0)
    out = length_standardised(frame, rs, np.ones(len(frame), dtype=bool), Support())
    # shares: JA 10/40, 30/40; EN 20/30, 10/30; standard = their mean
    v_ja, v_en = np.array([0.25, 0.75]), np.array([2 / 3, 1 / 3])
    diff = np.array([0.8 - 0.9, 0.4 - 0.6])
    assert out["value"] == pytest.approx(float(((v_ja + v_en) / 2 * diff).sum()))  # -0.1542
    assert out["value"] == pytest.approx(-0.154166, abs=1e-6)
    assert out["by_standard"]["japanese"]["value"] == pytest.approx(float((v_ja * diff).sum()))
    assert out["by_standard"]["english"]["value"] == pytest.approx(float((v_en * diff).sum()))
    # judged gap = composition + standardised (every stratum shared: nothing out of support)
    judged = 20 / 40 - 24 / 30  # JA (8 + 12) / 40, EN (18 + 6) / 30
    assert out["composition"]["value"] + out["value"] == pytest.approx(judged)
    assert "direct standardisation" in out["method"]


def test_without_byte_lengths_the_standardised_gap_is_null_with_a_reason() -> None:
    frame = hand_frame().drop(columns="n_bytes")
    rs = Resampler.from_frame(frame, 50, 0)
    out = length_standardised(frame, rs, np.ones(len(frame), dtype=bool), Support())
    assert out["value"] is None and out["not_estimable"]


def _figure(value: float, low: float, high: float) -> dict[str, float]:
    return {
        "value": value,
        "ci_low": low,
        "ci_high": high,
        "decision_low": low,
        "decision_high": high,
    }


def test_the_control_is_refused_outside_its_range_with_the_violation() -> None:
    assert control_holds(_figure(0.03, -0.01, 0.07), 0.06) is None  # inside: read
    why = control_holds(_figure(0.19, 0.16, 0.22), 0.06)
    assert why is not None and "does not hold here" in why and "+19.0 pp" in why
    assert control_holds({"value": None}, 0.06) is not None  # unchecked: not read
    contrast = {
        "difference": _figure(-0.2, -0.23, -0.17),
        "within_trained": _figure(-0.01, -0.02, 0.0),
        "within_training_free": _figure(0.19, 0.16, 0.22),
    }
    apply_control(contrast, 0.06)
    assert contrast["difference"]["value"] is None
    assert "does not hold here" in contrast["difference"]["not_estimable"]
    assert contrast["difference"]["violation"] == 0.19
    assert contrast["difference"]["unchecked"]["value"] == -0.2  # kept, not read
    assert contrast["control"]["holds"] is False and contrast["control"]["range"] == 0.06


def test_a_measured_size_violation_makes_h2_not_estimable_and_bounded() -> None:
    # H2 planted (-10 pp) and the n-gram drafter ~20 pp better on Japanese: the DiD
    # would read ~-30 pp; the control is refused, the DiD is not read, and H2 follows
    # from the trained drafter's within-confidence gap bounded by ±6 pp
    study = simulate_study(ALL_SCENARIOS["h2_ngram+20"], 40, seed=5)
    summary = analyze(study, 100, seed=0)
    h2 = summary["hypotheses"]["H2"]
    contrast = summary["h2_contrast"]
    assert h2["effect"] is None and "does not hold here" in h2["not_estimable"]
    assert contrast["control"]["violation"] == pytest.approx(
        contrast["within_training_free"]["value"]
    )
    assert contrast["control"]["violation"] > 0.06
    within = contrast["within_trained"]
    bounded = h2["bounded"]
    assert bounded["bound"] == 0.06
    assert bounded["interval"]["decision_high"] == pytest.approx(within["decision_high"] + 0.06)
    assert bounded["interval"]["decision_low"] == pytest.approx(within["decision_low"] - 0.06)
    supported = within["decision_high"] + 0.06 < -0.02 and within["decision_high"] < -0.02
    assert (h2["verdict"] == "supported") == supported
    assert h2["reading"] == bounded["reading"]
    # parallel trends holding: the control is read
    study = simulate_study(ALL_SCENARIOS["h2"], 40, seed=5)
    summary = analyze(study, 100, seed=0)
    assert summary["h2_contrast"]["control"]["holds"] is True
    assert summary["hypotheses"]["H2"]["effect"] is not None


def test_delta_in_speed_terms_is_the_leviathan_formula() -> None:
    out = margin_in_speed(0.78, 3, 0.02)
    at, below = iid_tokens_per_step(0.78, 3), iid_tokens_per_step(0.76, 3)
    assert at == pytest.approx(1 + 0.78 + 0.78**2 + 0.78**3)
    assert out.difference == pytest.approx(below - at)
    assert out.relative_speed == pytest.approx(below / at - 1)
    assert margin_in_speed(0.5, 1, 0.02).difference == pytest.approx(-0.02)  # k = 1: -δ


def test_no_figure_pools_k_unlabelled() -> None:
    from tokenlens.testing.simulate import committed_runs

    study = simulate_study(ALL_SCENARIOS["null"], 30, seed=2, runs=committed_runs(), replay=True)
    summary = analyze(study, 50, seed=0)
    for lang, rate in summary["acceptance"].items():
        assert rate["pooled_over_k"] == [1, 2, 3, 4, 5] and rate["family"] == "trained", lang
    for name, block in summary["families"].items():
        assert block["gap_all"]["pooled_over_k"] == [1, 2, 3, 4, 5], name
    per_k = summary["acceptance_per_k"]["trained"]
    assert sorted(per_k) == ["1", "2", "3", "4", "5"]
    runs = {r["k"]: r["acceptance"] for r in summary["runs"] if r["method"] == "draft_model"}
    for k, block in per_k.items():
        assert block["ja"]["rate"] == pytest.approx(runs[int(k)]["ja"]["rate"])
