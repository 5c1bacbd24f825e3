"""The reports in a real browser: headless Chromium opens them from file:// with the
network cut off, driven by Selenium through Debian's ``chromium-driver``.

Skipped when Debian's ``chromium`` or ``chromium-driver`` is missing
(scripts/install_chromium.sh installs both) unless TOKENLENS_REQUIRE_BROWSER=1, which
turns the skip into a failure for CI. Screenshots go to test-artifacts/report/
(gitignored).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import PAYLOADS, REPO, poisoned_bench, synthetic_rows, write_bench
from tokenlens.report import write_analyze_report, write_bench_report
from tokenlens.report.bench import CHART_IDS

# Headless, no GPU, and nothing that talks to the network on its own; the proxy and
# resolver rules make any fetch the page would try fail instead of leaving the box.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--proxy-server=127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--hide-scrollbars",
    "--window-size=1280,900",
)

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


def _executables() -> tuple[str, str] | None:
    """(chromium, chromedriver) from Debian's packages, or None."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """A fresh headless Chromium per test, its console and network logs recorded."""
    found = _executables()
    if found is None:
        if os.environ.get("TOKENLENS_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium or chromium-driver missing: run scripts/install_chromium.sh")
        pytest.skip("chromium or chromium-driver missing (scripts/install_chromium.sh)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    # "browser": console messages, uncaught exceptions, CSP violations, failed loads;
    # "performance": DevTools events, of which we read the requests the page made.
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    # An explicit driver, so Selenium Manager (which would go online) is never asked.
    driver = webdriver.Chrome(options=options, service=Service(found[1]))
    driver.get("about:blank")  # then forget what the browser's own start page did
    for log in ("browser", "performance"):
        driver.get_log(log)
    yield driver
    driver.quit()


def problems(driver: Any) -> list[str]:
    """Console errors, uncaught exceptions, CSP violations, failed loads (every SEVERE
    entry of the browser log) and any request that is not a local file."""
    found = [
        f"{entry['source']}: {entry['message']}"
        for entry in driver.get_log("browser")
        if entry["level"] == "SEVERE"
    ]
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            url = str(message["params"]["request"]["url"])
            if not url.startswith(("file:", "data:", "blob:", "about:")):
                found.append(f"network request: {url}")
    return found


def screenshot(driver: Any, path: Path) -> None:
    """A PNG of the whole page (not just the window)."""
    size = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
    )
    path.write_bytes(base64.b64decode(shot["data"]))


def _open(driver: Any, report: Path, shot: str, expression: str = STATE) -> dict[str, Any]:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(report.resolve().as_uri())
    WebDriverWait(driver, 90, poll_frequency=0.25).until(
        lambda d: d.execute_script(f"return {ALL_DONE}")
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    screenshot(driver, ARTIFACTS / shot)
    state: dict[str, Any] = json.loads(driver.execute_script(f"return {expression}"))
    return state


def test_a_broken_page_is_reported(browser: Any, tmp_path: Path) -> None:
    """The checks below can fail: an inline script the policy blocks, an uncaught
    exception and a remote image each show up in :func:`problems`."""
    page = tmp_path / "broken.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; script-src 'unsafe-eval'\"></head><body>"
        "<script>document.title = 'ran'</script>"
        '<img src="http://tokenlens.invalid/x.png"></body></html>',
        "utf-8",
    )
    browser.get(page.as_uri())
    found = problems(browser)
    assert browser.title != "ran"
    assert any("Content Security Policy" in p for p in found), found
    assert any(p == "network request: http://tokenlens.invalid/x.png" for p in found), found
    browser.execute_script("setTimeout(() => { throw new Error('tokenlens-boom') })")
    browser.execute_script("return 1")  # let the timer fire
    import time

    time.sleep(0.5)
    assert any("tokenlens-boom" in p for p in problems(browser))


def test_analyze_report_renders_offline(browser: Any, analysis: Path, tmp_path: Path) -> None:
    report = write_analyze_report(analysis, tmp_path / "report.html")
    state = _open(browser, report, "analyze.png")
    assert problems(browser) == []
    assert len(state["charts"]) >= 10
    for chart in state["charts"]:
        assert chart["rendered"] == "true", chart["id"]
        assert chart["marks"] >= 4, chart  # points, rules and bars drawn from the data
    assert state["requests"] >= 4 and state["tokens"] > 100
    assert (ARTIFACTS / "analyze.png").stat().st_size > 10_000


def test_injected_outputs_show_as_text_and_run_nothing(browser: Any, poisoned: Path) -> None:
    report = write_analyze_report(poisoned)
    state = _open(browser, report, "injection.png")
    assert problems(browser) == []  # a blocked inline script would be a CSP error here
    assert state["pwned"] is None and state["title"] == "tokenlens analysis"
    assert state["injected"] == 0 and state["scripts"] == 3
    for payload in PAYLOADS:
        assert payload in state["viewText"]
        assert payload in state["evidence"]
    assert all(chart["rendered"] == "true" for chart in state["charts"])


def test_bench_report_renders_offline(browser: Any, tmp_path: Path) -> None:
    rows = synthetic_rows()
    report = write_bench_report(write_bench(tmp_path / "bench", rows))
    state = _open(browser, report, "bench.png", BENCH_STATE)
    assert problems(browser) == []
    assert [chart["id"] for chart in state["charts"]] == [f"chart-{c}" for c in CHART_IDS]
    for chart in state["charts"]:
        assert chart["rendered"] == "true", chart["id"]
        assert chart["marks"] >= 6, chart  # a point, bar or line vertex per case / position
    assert state["rows"] == 1 + len(rows)
    assert "31.2 (30.9–31.6)" in state["casesText"]
    assert "| mtp | 2 | runner unknown | 31.2 (30.9–31.6) | 45.0 (44.1–45.9) |" in state["markdown"]
    assert (ARTIFACTS / "bench.png").stat().st_size > 10_000


def test_bench_plan_names_show_as_text_and_run_nothing(browser: Any, tmp_path: Path) -> None:
    report = write_bench_report(poisoned_bench(tmp_path / "bench"))
    state = _open(browser, report, "bench-injection.png", BENCH_STATE)
    assert problems(browser) == []  # a blocked inline script would be a CSP error here
    assert state["pwned"] is None and state["title"] == "tokenlens bench"
    assert state["injected"] == 0 and state["scripts"] == 3
    assert PAYLOADS[0] in state["heading"] and PAYLOADS[4] in state["footer"]
    for payload in PAYLOADS:
        assert payload in state["description"]
    for payload in (PAYLOADS[1], PAYLOADS[2], PAYLOADS[3], PAYLOADS[5]):
        assert payload in state["casesText"]  # method label, corpus, model, draft model
    assert all(chart["rendered"] == "true" and chart["marks"] > 0 for chart in state["charts"])
