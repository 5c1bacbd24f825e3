"""The replay check is worded over the rows whose draft the replay knows: "12,035 of
12,035 known rows equal; 3,340 unknown", never "15375 of 15375 (every row)" when 3,340
of those rows hold a draft the replay left −1 (issue 30)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenlens.cli.demo import check_line
from tokenlens.replay.compare import known_rows
from tokenlens.report.findings import findings_markdown

FULL = Path(__file__).resolve().parents[2] / "reports" / "full"

# replay/check.json of the committed full study, draft_model-k3 (the counts only)
CHECK = {
    "traced": "draft_model-k3",
    "replayed": "draft_model-k3",
    "requests": 120,
    "rows_traced": 15375,
    "rows_replayed": 15375,
    "equal_rows": 12035,
    "equal_judged": 15375,
    "unknown_drafts": 3340,
    "differing_requests": ["chat-01-ja"],
    "acceptance_traced": 0.6109,
    "acceptance_replayed": 0.6109,
}


def test_known_rows() -> None:
    assert known_rows(CHECK) == {
        "known": 12035,
        "equal_known": 12035,
        "unknown": 3340,
        "unknown_differ": 0,
    }
    # two unknown rows that differ in another column, one known row that differs
    worse = {**CHECK, "equal_rows": 12034, "equal_judged": 15372}
    assert known_rows(worse) == {
        "known": 12035,
        "equal_known": 12034,
        "unknown": 3340,
        "unknown_differ": 2,
    }
    assert known_rows({})["known"] is None


def test_the_demo_says_known_rows() -> None:
    line = check_line(CHECK)
    assert "12,035 of 12,035 known rows equal" in line and "3,340 unknown" in line
    assert "15375" not in line and "15,375" not in line


@pytest.mark.skipif(not FULL.is_dir(), reason="reports/full not committed")
def test_findings_say_known_rows() -> None:
    summary = json.loads((FULL / "analysis" / "summary.json").read_text("utf-8"))
    checks = json.loads((FULL / "replay" / "check.json").read_text("utf-8"))
    text = findings_markdown(summary, None, None, checks, None)
    line = next(x for x in text.splitlines() if "`draft_model-k3` against" in x)
    assert "12,035 of 12,035 known rows equal in all seven event columns; 3,340 unknown" in line
    assert "every row" not in line and "requests differ" not in line
    ngram = next(x for x in text.splitlines() if "`ngram-k3` against" in x)
    assert "15,841 of 15,841 known rows equal" in ngram and "unknown" not in ngram
