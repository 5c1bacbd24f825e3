"""Results rows from measured repeats: medians, spreads, counters, speedups (hand-checked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import write_plan
from tokenlens.bench.plan import load_plan
from tokenlens.bench.rows import Repeat, case_row, with_speedups
from tokenlens.bench_results import read_results, write_results
from tokenlens.engine.results import SpecCounters


def _repeat(wall: float, tokens: int, chars: int, counters: SpecCounters) -> Repeat:
    return Repeat(wall, tokens, chars, chars * 2, [0.5, 0.7], counters)


def test_case_row_medians_spread_and_counters(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path))
    case = plan.cases[4]  # m/ng-k3/c/all/ja
    c = SpecCounters(10, 30, 12, (6, 4, 2))
    repeats = [_repeat(4.0, 40, 60, c), _repeat(5.0, 40, 60, c), _repeat(2.0, 40, 60, c)]
    row = case_row(case, plan, repeats, "runs/x", "sig", "bfloat16")
    assert row["case_id"] == "m/ng-k3/c/all/ja" and row["k"] == 3 and row["method"] == "ngram"
    assert row["tok_s"] == 10.0 and row["tok_s_min"] == 8.0 and row["tok_s_max"] == 20.0
    assert row["chars_s"] == 15.0 and row["bytes_s"] == 30.0
    assert row["tok_s_cv"] == pytest.approx(
        ((8 - 38 / 3) ** 2 + (10 - 38 / 3) ** 2 + (20 - 38 / 3) ** 2) ** 0.5 / 3**0.5 / (38 / 3)
    )
    assert row["ttft_s"] == 0.6 and row["wall_s"] == 4.0
    # Counters are summed over the repeats; rates follow vLLM's definitions.
    assert (row["num_drafts"], row["num_draft_tokens"], row["num_accepted_tokens"]) == (30, 90, 36)
    assert row["acceptance_rate"] == pytest.approx(0.4)
    assert row["mean_acceptance_length"] == pytest.approx(2.2)
    assert row["acceptance_per_position"] == pytest.approx([0.6, 0.4, 0.2])
    assert row["dtype"] == "bfloat16"


def test_baseline_row_has_no_acceptance(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path))
    row = case_row(plan.cases[0], plan, [_repeat(2.0, 10, 20, SpecCounters())], "r", "s", None)
    assert row["k"] == 0 and row["num_drafts"] == 0
    assert row["acceptance_rate"] is None and row["acceptance_per_position"] is None
    assert row["tok_s_cv"] == 0.0


def test_speedups_match_baseline_of_same_language(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path))
    rows = [
        case_row(plan.cases[i], plan, [_repeat(wall, 10, 20, SpecCounters())], "r", "s", None)
        for i, wall in [(0, 2.0), (1, 1.0), (4, 1.0), (5, 0.5)]
    ]
    out = with_speedups(rows)
    assert [r["speedup_tok_s"] for r in out] == [1.0, 1.0, 2.0, 2.0]
    assert out[2]["baseline_case_id"] == "m/baseline/c/all/ja"
    # Without a matching baseline there is no speedup, rather than a wrong one.
    lonely = with_speedups(rows[2:])
    assert [r["speedup_tok_s"] for r in lonely] == [None, None]
    # And the CSV round-trips every value.
    write_results(tmp_path / "results.csv", out)
    back = read_results(tmp_path / "results.csv")
    assert back[2]["speedup_tok_s"] == 2.0 and back[0]["acceptance_rate"] is None
    assert back[3]["case_id"] == "m/ng-k3/c/all/en"
