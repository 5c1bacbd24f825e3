"""summary.json stays readable: files written by older tokenlens read and render.

Contract checked: every committed summary (the samples under reports/, and copies of
older ones in tests/data/summaries/, taken from the repository's history: the demo's of
30 November 2026, before drafter families, and of 2 December, before format versions)
loads into the typed view, whose verdicts, rates and runs are the file's own values,
and renders as tables.md and FINDINGS.md without error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import REPO
from tokenlens.analysis.summary_file import load_summary
from tokenlens.report.findings import findings_markdown
from tokenlens.report.tables import render

OLD = sorted((REPO / "tests" / "data" / "summaries").glob("*.json"))
COMMITTED = sorted((REPO / "reports").glob("**/summary.json"))


def test_old_summaries_are_committed() -> None:
    assert len(OLD) >= 2
    for path in OLD:
        assert "format_version" not in json.loads(path.read_text("utf-8"))


@pytest.mark.parametrize("path", OLD + COMMITTED, ids=lambda p: str(p.relative_to(REPO)))
def test_a_summary_reads_as_written(path: Path) -> None:
    raw = json.loads(path.read_text("utf-8"))
    s = load_summary(path)
    assert s.verdicts == {k: v.get("verdict") for k, v in raw["hypotheses"].items()}
    for key in ("acceptance", "acceptance_judged"):
        for lang, rate in getattr(s, key).items():
            assert rate.rate == raw[key][lang]["rate"], (key, lang)
    for key, block in s.breakdowns.items():
        for lang, groups in block.items():
            for group, rate in groups.items():
                assert (rate.rate, rate.n) == (
                    raw[key][lang][group].get("rate"),
                    raw[key][lang][group].get("n"),
                ), (key, lang, group)
    assert [r.label for r in s.runs] == [r.get("label") for r in raw.get("runs", [])]
    for name, family in s.families.items():
        assert family.runs == tuple(raw["families"][name].get("runs", ())), name


@pytest.mark.parametrize("path", OLD, ids=lambda p: p.name)
def test_an_old_summary_renders(path: Path) -> None:
    s = load_summary(path)
    tables = render(s)
    assert tables.startswith("#") and "## " in tables
    findings = findings_markdown(s)
    for name, verdict in s.verdicts.items():
        assert name in findings and verdict is not None
