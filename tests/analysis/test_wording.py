"""The wording rule: a verdict says no more than its test, against its margin, with the
rows, runs and interval it read."""

from __future__ import annotations

import pytest

from tokenlens.analysis.rules import NO, NO_DEFICIT, Rules
from tokenlens.analysis.verdicts import _rule
from tokenlens.analysis.wording import (
    interval_words,
    no_deficit_sentence,
    reading_sentence,
    runs_phrase,
)

SCOPE = "judged positions, runs of draft_model at k = 1–5"


def test_no_deficit_is_worded_against_the_margin() -> None:
    text = no_deficit_sentence(0.02, SCOPE, {"decision_low": -0.018, "decision_high": 0.0196}, 0.9)
    assert text.startswith(
        "Japanese is not worse than English by more than δ = 2 pp (judged positions, runs "
        "of draft_model at k = 1–5, 90% decision interval -1.8 to +2.0 pp)"
    )
    assert "at all" not in text


@pytest.mark.parametrize(
    ("reading", "start"),
    [
        ("yes", "Japanese is worse than English by more than δ = 2 pp ("),
        ("no", "Japanese is not worse than English by more than δ = 2 pp ("),
        ("unsure", "Japanese is neither shown worse than English by more than δ = 2 pp nor"),
        ("n/a", "no reading against δ = 2 pp"),
    ],
)
def test_every_reading_names_the_margin_and_its_interval(reading: str, start: str) -> None:
    text = reading_sentence(reading, 0.02, SCOPE, -0.05, 0.01, 0.9)
    assert text.startswith(start)
    assert "90% decision interval -5.0 to +1.0 pp" in text and SCOPE in text


def test_another_margin_and_level_are_printed_as_set() -> None:
    text = reading_sentence("no", 0.035, "judged positions", -0.01, 0.02, 0.8)
    assert "δ = 3.5 pp" in text and "80% decision interval -1.0 to +2.0 pp" in text
    assert interval_words(None, 0.02, 0.9) == ""


def test_runs_are_named_by_method_and_k() -> None:
    assert runs_phrase([("draft_model", k) for k in (1, 2, 3, 4, 5)]) == (
        "runs of draft_model at k = 1–5"
    )
    assert runs_phrase([("draft_model", 3), ("ngram", 1), ("ngram", 3)]) == (
        "runs of draft_model at k = 3 and ngram at k = 1, 3"
    )


def test_the_verdict_rule_uses_the_wording() -> None:
    gap = {
        "value": 0.001,
        "ci_low": -0.022,
        "ci_high": 0.023,
        "decision_low": -0.018,
        "decision_high": 0.0196,
    }
    verdict, note = _rule(gap, NO, None, Rules(), scope=SCOPE)
    assert verdict == NO_DEFICIT
    assert "not worse than English by more than δ = 2 pp" in note and SCOPE in note
    assert "90% decision interval -1.8 to +2.0 pp" in note
    assert "not worse at all" not in note and "not worse than English here" not in note
