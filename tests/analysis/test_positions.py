"""Acceptance by draft position, per run, on hand-built runs of different k.

Two runs on one JA/EN pair (ids and texts in tests/analysis/handbuilt.py):

``ngram-k3`` (k = 3; its second Japanese step proposed only two drafts, as n-gram does
near the end of a match):
  ja step 0: accept, accept, reject (target emits idx 2)       -> positions 0 1 2
  ja step 1: reject at 0 (idx 3), position 1 not judged        -> positions 0 1
  ja step 2: accept (idx 4), reject (idx 5), 2 not judged      -> positions 0 1 2
  en step 0: accept x3 (idx 0-2), bonus idx 3                   -> positions 0 1 2
  en step 1: reject at 0 (idx 4), 1 and 2 not judged            -> positions 0 1 2
``draft_model-k1`` (k = 1):
  ja: accept (idx 0), reject (idx 2), accept (idx 3), reject (idx 5): 2 of 4
  en: accept (idx 0), accept (idx 2), reject (idx 4): 2 of 3

By hand, ngram-k3, Japanese: position 0 accepted in steps 0 and 2 of 3 drafts at it
(2/3); position 1 accepted in step 0 of the 3 steps with a draft there (1/3); position 2
in none of the 2 steps that proposed one (0/2, not 0/3: step 1 proposed no third draft,
and not 0/7: the k = 1 run has no position 2 at all). Pooling both runs, as the first
version did, divides every position by the 7 Japanese drafts of both runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.analysis.handbuilt import EN, JA, write_run
from tests.support import assert_one_line_error, cli, write_prompts
from tokenlens.analysis import AnalyzeConfig, run_analyze

W = 999  # a rejected draft

NGRAM_K3 = [
    ("ja-1", 0, 0, JA[3][0], True, JA[3][0], 0),
    ("ja-1", 0, 1, JA[3][1], True, JA[3][1], 1),
    ("ja-1", 0, 2, W, False, JA[3][2], 2),
    ("ja-1", 1, 0, W, False, JA[3][3], 3),
    ("ja-1", 1, 1, W, False, None, None),
    ("ja-1", 2, 0, JA[3][4], True, JA[3][4], 4),
    ("ja-1", 2, 1, W, False, JA[3][5], 5),
    ("ja-1", 2, 2, W, False, None, None),
    ("en-1", 0, 0, EN[3][0], True, EN[3][0], 0),
    ("en-1", 0, 1, EN[3][1], True, EN[3][1], 1),
    ("en-1", 0, 2, EN[3][2], True, EN[3][2], 2),
    ("en-1", 1, 0, W, False, EN[3][4], 4),
    ("en-1", 1, 1, W, False, None, None),
    ("en-1", 1, 2, W, False, None, None),
]
DRAFT_K1 = [
    ("ja-1", 0, 0, JA[3][0], True, JA[3][0], 0),
    ("ja-1", 1, 0, W, False, JA[3][2], 2),
    ("ja-1", 2, 0, JA[3][3], True, JA[3][3], 3),
    ("ja-1", 3, 0, W, False, JA[3][5], 5),
    ("en-1", 0, 0, EN[3][0], True, EN[3][0], 0),
    ("en-1", 1, 0, EN[3][2], True, EN[3][2], 2),
    ("en-1", 2, 0, W, False, EN[3][4], 4),
]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("mixed")
    runs = (
        write_run(root / "ngram-k3", "ngram", 3, NGRAM_K3),
        write_run(root / "draft_model-k1", "draft_model", 1, DRAFT_K1),
    )
    result = run_analyze(AnalyzeConfig(runs=runs, out=root / "out", n_boot=30, min_count=1))
    summary: dict[str, Any] = json.loads(result.summary_path.read_text(encoding="utf-8"))
    return summary


def run(summary: dict[str, Any], label: str) -> dict[str, Any]:
    (found,) = [r for r in summary["runs"] if r["label"] == label]
    return found


def test_unconditional_over_the_steps_that_proposed_a_draft_at_p(mixed: dict[str, Any]) -> None:
    ja = run(mixed, "ngram-k3")["by_position"]["ja"]
    assert [ja[p]["rate"] for p in "012"] == pytest.approx([2 / 3, 1 / 3, 0.0])
    assert [ja[p]["n"] for p in "012"] == [3, 3, 2]  # step 1 proposed no third draft
    assert [ja[p]["accepted"] for p in "012"] == [2, 1, 0]
    # vLLM's per-position counter over all drafts of the run: the speed model's a_p
    assert [ja[p]["per_draft"] for p in "012"] == pytest.approx([2 / 3, 1 / 3, 0.0])
    assert {ja[p]["drafts"] for p in "012"} == {3}
    en = run(mixed, "ngram-k3")["by_position"]["en"]
    assert [en[p]["rate"] for p in "012"] == pytest.approx([0.5, 0.5, 0.5])
    assert [en[p]["n"] for p in "012"] == [2, 2, 2]


def test_conditional_over_the_steps_that_reached_p(mixed: dict[str, Any]) -> None:
    ja = run(mixed, "ngram-k3")["by_position_conditional"]["ja"]
    # p1 reached in steps 0 and 2 (accepted, rejected); p2 in step 0 only (rejected)
    assert [ja[p]["rate"] for p in "012"] == pytest.approx([2 / 3, 1 / 2, 0.0])
    assert [ja[p]["n"] for p in "012"] == [3, 2, 1]


def test_each_run_has_only_its_own_positions(mixed: dict[str, Any]) -> None:
    k1 = run(mixed, "draft_model-k1")
    assert set(k1["by_position"]["ja"]) == {"0"}
    assert k1["by_position"]["ja"]["0"]["rate"] == pytest.approx(2 / 4)
    assert k1["by_position"]["ja"]["0"]["n"] == 4
    assert k1["by_position"]["en"]["0"]["rate"] == pytest.approx(2 / 3)


def test_nothing_pooled_across_runs_or_families(mixed: dict[str, Any]) -> None:
    # The old table divided every position by all 7 Japanese drafts of both runs and
    # pooled the families; the top-level tables are now one family's, here one run.
    scope = mixed["scope"]
    assert scope["family"] == "trained" and scope["runs"] == ["draft_model-k1"]
    assert scope["left_out"] == ["ngram-k3"]
    assert mixed["by_position"] == run(mixed, "draft_model-k1")["by_position"]
    assert mixed["by_position"]["ja"]["0"]["n"] == 4
    assert mixed["acceptance"]["ja"]["n"] == 4  # the trained run only, not 4 + 8


def test_no_top_level_positions_when_the_family_has_several_k(tmp_path: Path) -> None:
    k1 = [(r, s, p, d, a, e, i) for r, s, p, d, a, e, i in DRAFT_K1]
    runs = (
        write_run(tmp_path / "draft_model-k3", "draft_model", 3, NGRAM_K3),
        write_run(tmp_path / "draft_model-k1", "draft_model", 1, k1),
    )
    s = run_analyze(AnalyzeConfig(runs=runs, out=tmp_path / "out", n_boot=30, min_count=1)).summary
    assert s["by_position"] == {} and s["by_position_conditional"] == {}
    assert "per run only" in s["scope"]["note"]
    assert [run(s, "draft_model-k3")["by_position"]["ja"][p]["n"] for p in "012"] == [3, 3, 2]


def test_one_configuration_keeps_the_top_level_tables(tmp_path: Path) -> None:
    path = write_run(tmp_path / "ngram-k3", "ngram", 3, NGRAM_K3)
    result = run_analyze(AnalyzeConfig(runs=(path,), out=tmp_path / "out", n_boot=30, min_count=1))
    s = result.summary
    assert s["by_position"] == run(s, "ngram-k3")["by_position"]
    assert [s["by_position"]["ja"][p]["n"] for p in "012"] == [3, 3, 2]
    assert "nothing is pooled" in s["scope"]["note"]


def test_tables_show_positions_per_run(mixed: dict[str, Any], tmp_path: Path) -> None:
    from tokenlens.report.tables import render

    text = render(mixed)
    block = text[text.index("## By draft position, per run: accepted at p / drafts at p") :]
    block = block[: block.index("\n## ", 5)]
    rows = [line for line in block.splitlines() if line.startswith("| ngram-k3 | 3 | ja")]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].split("|")[1:-1]]
    assert cells[3].startswith("0.667") and "(n=3)" in cells[3]
    assert cells[5].startswith("0.000") and "(n=2)" in cells[5]
    k1 = [line for line in block.splitlines() if line.startswith("| draft_model-k1 | 1 | ja")]
    assert k1 and k1[0].split("|")[5].strip() == "–"  # no position 1 in a k = 1 run


def test_prompts_give_domains_and_refuse_unknown_prompts(tmp_path: Path) -> None:
    runs = (write_run(tmp_path / "ngram-k3", "ngram", 3, NGRAM_K3),)
    prompts = [
        {"id": "ja-1", "lang": "ja", "pair": "p1", "text": "x", "tags": {"domain": "news"}},
        {"id": "en-1", "lang": "en", "pair": "p1", "text": "y", "tags": {"domain": "news"}},
    ]
    good = write_prompts(tmp_path / "p.jsonl", prompts)
    result = run_analyze(
        AnalyzeConfig(runs=runs, out=tmp_path / "o1", n_boot=30, min_count=1, prompts=good)
    )
    domains = result.summary["domains"]["families"]["training_free"]["domains"]
    assert set(domains) == {"news"} and domains["news"]["pairs"] == 1
    bad = write_prompts(tmp_path / "bad.jsonl", prompts[:1])
    status, _, stderr = cli(
        ["analyze", str(runs[0]), "--out", str(tmp_path / "o2"), "--prompts", str(bad), "--quiet"]
    )
    assert_one_line_error(status, stderr, "no tags.domain for prompt 'en-1'")
    assert not (tmp_path / "o2").exists()
