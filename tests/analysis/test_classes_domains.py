"""Class breakdowns as JA − EN differences (one-language classes marked, Holm within each
declared family of comparisons) and the per-domain gaps with their permutation test."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tokenlens.analysis.bootstrap import Resampler
from tokenlens.analysis.classes import COMPARED, ONLY_JA, PER_LANGUAGE, class_gaps, holm
from tokenlens.analysis.comparable import not_comparable
from tokenlens.analysis.decompose import Support
from tokenlens.analysis.domains import domain_section
from tokenlens.analysis.gap import gap
from tokenlens.analysis.parts import families
from tokenlens.analysis.rules import NO, YES, Rules
from tokenlens.analysis.summary_figures import Estimate
from tokenlens.testing import SCENARIOS, simulate_study


def test_one_language_classes_are_marked_and_holm_is_within_the_table() -> None:
    frame = simulate_study(SCENARIOS["h1"], 30, seed=4).frame()
    rs = Resampler.from_frame(frame, 100, 0)
    judged = frame["judged"].to_numpy(dtype=bool) & frame["script"].notna().to_numpy()
    typed = class_gaps(frame, rs, families(frame), judged, Support(), 30, columns=("script",))
    out = typed.to_json()  # as summary.json holds it: keys present or left out
    # when the families were declared, truthfully: after the first full report
    assert "after the first full study's exploratory search" in out["family_of_comparisons"]
    assert "not declared before the data" in out["declared"]
    for block in out["families"].values():
        table = block["by"]["script"]
        for c in table["classes"]:  # compared only when both languages fill the class
            fills = [
                c[f"rows_{lang}"] >= 30 and c[f"prompts_{lang}"] >= Support().min_prompts
                for lang in ("ja", "en")
            ]
            alike = COMPARED if not_comparable("script", c["class"]) is None else PER_LANGUAGE
            want = alike if all(fills) else ONLY_JA if fills[0] else c["status"]
            assert c["status"] == want
            assert ("difference" in c) == (c["status"] == COMPARED)
        assert {c["class"] for c in table["classes"] if c["status"] == ONLY_JA} >= {"katakana"}
        compared = [c for c in table["classes"] if c["status"] == COMPARED]
        assert compared and table["comparisons"] == len(compared)
        raw = np.array([c["difference"]["p"] for c in compared])
        assert [c["difference"]["p_holm"] for c in compared] == pytest.approx(list(holm(raw)))
        assert table["adjusted_level"] == pytest.approx(1 - 0.05 / len(compared))
        for c in compared:
            d = c["difference"]
            assert d["value"] == pytest.approx(c["rate_ja"]["rate"] - c["rate_en"]["rate"])
            assert d["adjusted_low"] <= d["ci_low"] <= d["value"] <= d["ci_high"]
            assert d["ci_high"] <= d["adjusted_high"]


def domain_frame(effect_a: float, mixed: bool = False) -> pd.DataFrame:
    """20 translation pairs in domains a and b, 200 judged rows per prompt: domain a's
    Japanese rows accepted ``effect_a`` less often; the rest at 60%."""
    rows = []
    for pair in range(20):
        domain = "a" if pair < 10 else "b"
        for lang in ("ja", "en"):
            rate = 0.6 - (effect_a if (domain == "a" and lang == "ja") else 0.0)
            # a little spread between pairs (Japanese only, so that the pairs' gaps
            # differ and the bootstrap has something to vary)
            spread = (0.01 if pair % 2 else -0.01) if lang == "ja" else 0.0
            accepted = round(200 * (rate + spread))
            for i in range(200):
                rows.append(
                    {
                        "run": "dm",
                        "method": "draft_model",
                        "k": 3,
                        "request_id": f"p{pair}-{lang}",
                        "prompt_id": f"p{pair}-{lang}",
                        "lang": lang,
                        "pair": f"p{pair}",
                        "domain": "b" if mixed and pair == 0 and lang == "en" else domain,
                        "accepted": i < accepted,
                        "judged": True,
                        "position": 0,
                    }
                )
    return pd.DataFrame(rows)


def section(frame: pd.DataFrame) -> dict[str, object]:
    rs = Resampler.from_frame(frame, 200, 0)
    judged = np.ones(len(frame), dtype=bool)
    fams = families(frame)
    pooled = {"trained": Estimate.parse(gap(frame, rs, judged))}
    # as summary.json holds it: keys without a value left out
    return domain_section(frame, rs, fams, judged, pooled, Rules(), 0, "test").to_json()


def test_a_domain_with_a_deficit_is_found_and_departs() -> None:
    out = section(domain_frame(0.5))
    block = out["families"]["trained"]  # type: ignore[index]
    assert block["domains"]["a"]["value"] == pytest.approx(-0.5, abs=0.01)
    assert block["domains"]["b"]["value"] == pytest.approx(0.0, abs=0.01)
    assert block["domains"]["a"]["pairs"] == 10
    assert block["domains"]["a"]["reading"] == YES  # far below -delta
    assert block["pooled_reading"] == YES  # pooled: -25 pp
    # domain b reads no deficit while the pooled gap reads one: it departs
    assert [d["domain"] for d in block["departures"]] == ["b"]
    assert block["domains"]["b"]["reading"] == NO
    het = block["heterogeneity"]
    assert het["p"] < 0.01 and het["spread"] == pytest.approx(0.25, abs=0.01)
    assert het["permutations"] == 9999 and het["domains"] == 2 and het["pairs"] == 20


def test_equal_domains_are_not_heterogeneous() -> None:
    het = section(domain_frame(0.0))["families"]["trained"]["heterogeneity"]  # type: ignore[index]
    assert het["value"] == pytest.approx(0.0) and het["p"] == 1.0


def test_a_pair_split_across_domains_cannot_be_permuted() -> None:
    het = section(domain_frame(0.5, mixed=True))["families"]["trained"]["heterogeneity"]  # type: ignore[index]
    assert "different domains" in het["not_estimable"]
