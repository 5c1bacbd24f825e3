"""tokenlens.format: every number format, the language order and the Markdown rules.

Expected texts are written out by hand, so a changed precision or rule shows here."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tokenlens.analysis.summary_figures import Estimate, Rate
from tokenlens.format import (
    MISSING,
    code,
    interval,
    interval_prose,
    lang_order,
    md,
    md_table,
    num,
    qty,
    rate_cell,
    spread,
    verdict_words,
)


@pytest.mark.parametrize(
    ("value", "kind", "text"),
    [
        (0.3649, "rate", "0.365"),
        (0.36, "rate", "0.360"),
        (-0.0123, "pp", "-1.2"),
        (0.1, "pp", "+10.0"),
        (-0.12, "pct", "-12%"),
        (0.4567, "share", "45.7%"),
        (1.5555, "speedup", "1.56"),
        (12.345, "throughput", "12.3"),
        (2.435, "per_step", "2.44"),
        (0.019, "cv", "1.9%"),
        (0.25, "seconds", "0.250"),
    ],
)
def test_one_precision_per_kind(value: float, kind: str, text: str) -> None:
    assert num(value, kind) == text


@pytest.mark.parametrize("value", [None, float("nan"), float("inf"), True, "x"])
def test_anything_not_a_finite_number_is_missing(value: object) -> None:
    assert num(value, "rate") == MISSING and qty(value, "pp") == MISSING


def test_units_and_intervals() -> None:
    assert qty(-0.0123, "pp") == "-1.2 pp" and qty(1.4, "speedup") == "1.40×"
    stat = Estimate(value=-0.062, ci_low=-0.079, ci_high=-0.046)
    assert interval(stat, "pp") == "-6.2 pp [-7.9, -4.6]"
    assert interval_prose(stat, "pp") == "-6.2 pp (95% CI -7.9 to -4.6)"
    assert interval_prose(Estimate(value=-0.12, ci_low=-0.18, ci_high=-0.06), "pct") == (
        "-12% (95% CI -18% to -6%)"
    )
    assert interval(Estimate(value=0.5, ci_low=None, ci_high=0.6), "rate") == "0.500"
    # a dict is not a figure: it is typed (summary.json's reader) before it prints
    with pytest.raises(TypeError, match="typed"):
        interval({"value": 0.5, "ci_low": 0.4, "ci_high": 0.6}, "rate")
    assert interval(None, "pp") == MISSING and interval_prose(None, "pp") == "n/a"
    assert spread(12.3, 11.94, 12.46, "throughput") == "12.3 (11.9–12.5)"
    assert spread(12.3, 12.31, 12.34, "throughput") == "12.3"  # the range rounds away
    assert spread(12.3, None, 12.5, "throughput") == "12.3"


def test_rate_cell_marks_sparse_groups_and_counts() -> None:
    stat = Rate(rate=0.467, ci_low=0.286, ci_high=0.636, n=15, sparse=True)
    assert rate_cell(stat) == "0.467 [0.286, 0.636]*"
    assert rate_cell(stat, count=True) == "0.467 [0.286, 0.636] (n=15)*"
    assert rate_cell(replace(stat, sparse=False)) == "0.467 [0.286, 0.636]"
    assert rate_cell(None) == MISSING


def test_japanese_first_then_alphabetical() -> None:
    assert lang_order(["zh", "en", "de", "ja", "en"]) == ["ja", "en", "de", "zh"]
    assert lang_order({"en": 1, "fr": 2}) == ["en", "fr"]


def test_verdict_words() -> None:
    assert verdict_words("not_supported") == "not supported"
    assert verdict_words("insufficient_data") == "insufficient data"
    assert verdict_words("something_new") == "something_new"


def test_markdown_escaping_is_one_line_and_inert() -> None:
    assert md("a|b_c\n<i>*x*</i>\u2028#1") == "a\\|b\\_c \\<i\\>\\*x\\*\\</i\\> \\#1"
    assert code("sig:a|b") == "`sig:a|b`" and code("sig:a|b", table=True) == "`sig:a\\|b`"
    assert code("x`y") == "``x`y``" and code("`x") == "`` `x ``"


def test_md_table_aligns_the_columns_it_is_told() -> None:
    lines = md_table(["name", "n", "rate"], [["a", "1", "0.5"]], right=[1, 2])
    assert lines == ["| name | n | rate |", "|---|---:|---:|", "| a | 1 | 0.5 |", ""]
    assert md_table(["x"], [])[1] == "|---|"
