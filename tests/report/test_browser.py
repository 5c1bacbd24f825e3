"""The reports in a real browser: headless Chromium opens them from file:// with the
network cut off, driven over the DevTools pipe (tests/report/cdp.py).

Skipped when Debian's ``chromium`` is missing (scripts/install_chromium.sh installs
it) unless TOKENLENS_REQUIRE_BROWSER=1, which turns the skip into a failure for CI.
Screenshots go to test-artifacts/report/ (gitignored).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.bench.test_tables import synthetic_rows
from tests.report.cdp import Browser, chromium_path
from tests.report.conftest import PAYLOADS
from tests.report.test_bench_report import poisoned_bench, write_bench
from tests.support import REPO
from tokenlens.report import write_analyze_report, write_bench_report
from tokenlens.report.bench import CHART_IDS

ARTIFACTS = REPO / "test-artifacts" / "report"
ALL_DONE = "[...document.querySelectorAll('.chart')].every(e => e.dataset.rendered)"
STATE = """JSON.stringify({
  title: document.title,
  pwned: window.__pwned === undefined ? null : window.__pwned,
  charts: [...document.querySelectorAll('.chart')].map(e => ({
    id: e.id, rendered: e.dataset.rendered,
    marks: e.querySelectorAll('svg [role=graphics-symbol], svg .mark-symbol path').length})),
  tokens: document.querySelectorAll('#token-view .t').length,
  requests: document.querySelectorAll('#token-view .request').length,
  viewText: document.getElementById('token-view').textContent,
  evidence: document.querySelector('#hyp-H1 .evidence').textContent,
  injected: document.querySelectorAll('img, #pwn, textarea, body script:not([id]) ~ b').length,
  scripts: document.scripts.length})"""
BENCH_STATE = """JSON.stringify({
  title: document.title,
  pwned: window.__pwned === undefined ? null : window.__pwned,
  charts: [...document.querySelectorAll('.chart')].map(e => ({
    id: e.id, rendered: e.dataset.rendered,
    marks: e.querySelectorAll('svg [role=graphics-symbol], svg .mark-symbol path').length})),
  heading: document.querySelector('h1').textContent,
  description: document.querySelector('.sub').textContent,
  rows: document.querySelectorAll('#cases tr').length,
  casesText: document.getElementById('cases').textContent,
  markdown: document.getElementById('results-md').textContent,
  footer: document.querySelector('footer').textContent,
  injected: document.querySelectorAll('img, #pwn, textarea, body script:not([id]) ~ b').length,
  scripts: document.scripts.length})"""


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    exe = chromium_path()
    if exe is None:
        if os.environ.get("TOKENLENS_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium not installed: run scripts/install_chromium.sh")
        pytest.skip("chromium not installed (scripts/install_chromium.sh)")
    b = Browser(exe, tmp_path / "profile")  # a fresh profile for every test
    yield b
    b.close()


def _open(browser: Browser, report: Path, shot: str, expression: str = STATE) -> dict[str, Any]:
    import json

    browser.open(report.resolve().as_uri(), ALL_DONE)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.screenshot(ARTIFACTS / shot)
    state: dict[str, Any] = json.loads(browser.evaluate(expression))
    return state


def test_analyze_report_renders_offline(browser: Browser, analysis: Path, tmp_path: Path) -> None:
    report = write_analyze_report(analysis, tmp_path / "report.html")
    state = _open(browser, report, "analyze.png")
    assert browser.problems() == []
    assert len(state["charts"]) >= 10
    for chart in state["charts"]:
        assert chart["rendered"] == "true", chart["id"]
        assert chart["marks"] >= 4, chart  # points, rules and bars drawn from the data
    assert state["requests"] >= 4 and state["tokens"] > 100
    assert (ARTIFACTS / "analyze.png").stat().st_size > 10_000


def test_injected_outputs_show_as_text_and_run_nothing(browser: Browser, poisoned: Path) -> None:
    report = write_analyze_report(poisoned)
    state = _open(browser, report, "injection.png")
    assert browser.problems() == []  # a blocked inline script would be a CSP error here
    assert state["pwned"] is None and state["title"] == "tokenlens analysis"
    assert state["injected"] == 0 and state["scripts"] == 3
    for payload in PAYLOADS:
        assert payload in state["viewText"]
        assert payload in state["evidence"]
    assert all(chart["rendered"] == "true" for chart in state["charts"])


def test_bench_report_renders_offline(browser: Browser, tmp_path: Path) -> None:
    rows = synthetic_rows()
    report = write_bench_report(write_bench(tmp_path / "bench", rows))
    state = _open(browser, report, "bench.png", BENCH_STATE)
    assert browser.problems() == []
    assert [chart["id"] for chart in state["charts"]] == [f"chart-{c}" for c in CHART_IDS]
    for chart in state["charts"]:
        assert chart["rendered"] == "true", chart["id"]
        assert chart["marks"] >= 6, chart  # a point, bar or line vertex per case / position
    assert state["rows"] == 1 + len(rows)
    assert "31.2 (30.9–31.6)" in state["casesText"]
    assert "| mtp | 2 | 31.2 (30.9–31.6) | 45.0 (44.1–45.9) |" in state["markdown"]
    assert (ARTIFACTS / "bench.png").stat().st_size > 10_000


def test_bench_plan_names_show_as_text_and_run_nothing(browser: Browser, tmp_path: Path) -> None:
    report = write_bench_report(poisoned_bench(tmp_path / "bench"))
    state = _open(browser, report, "bench-injection.png", BENCH_STATE)
    assert browser.problems() == []  # a blocked inline script would be a CSP error here
    assert state["pwned"] is None and state["title"] == "tokenlens bench"
    assert state["injected"] == 0 and state["scripts"] == 3
    assert PAYLOADS[0] in state["heading"] and PAYLOADS[4] in state["footer"]
    for payload in PAYLOADS:
        assert payload in state["description"]
    for payload in (PAYLOADS[1], PAYLOADS[2], PAYLOADS[3], PAYLOADS[5]):
        assert payload in state["casesText"]  # method label, corpus, model, draft model
    assert all(chart["rendered"] == "true" and chart["marks"] > 0 for chart in state["charts"])
