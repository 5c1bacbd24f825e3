"""The README's main job, shrunk: `tokenlens demo` end to end on the embedded pair.

One traced prompt per language is far below what the verdict rules need (about 30
prompts per language), so the demo must answer ``insufficient_data`` for both
hypotheses, not any verdict at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support import REPO
from tokenlens.bench.results_csv import read_results
from tokenlens.format import num, verdict_words
from tokenlens.rundir import read_run

pytestmark = pytest.mark.vllm


def test_demo_small(pair: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "demo"
    cmd = [
        sys.executable,
        "-m",
        "tokenlens",
        "demo",
        "--size",
        "small",
        "--limit",
        "1",
        "--max-tokens",
        "16",
        "--out",
        str(out),
        "--quiet",
    ]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"index:    {out / 'index.html'}" in proc.stdout
    assert f"summary:  {out / 'summary.md'}" in proc.stdout
    run = read_run(out / "runs" / "draft_model-k3")
    assert run.complete and run.requests.num_rows == 2
    assert {r["lang"] for r in run.requests.to_pylist()} == {"ja", "en"}
    tokens = sum(len(t) for t in run.requests.column("output_token_ids").to_pylist())
    assert f"| draft_model-k3 | 2 | {tokens} |" in (out / "summary.md").read_text()
    summary = json.loads((out / "analysis" / "summary.json").read_text())
    assert set(summary["acceptance"]) == {"ja", "en"}
    # The analysis counts exactly the run's draft tokens per language.
    assert run.events is not None
    langs = {r["request_id"]: r["lang"] for r in run.requests.to_pylist()}
    drafts = Counter(langs[e["request_id"]] for e in run.events.to_pylist())
    assert {lang: summary["acceptance"][lang]["n"] for lang in ("ja", "en")} == drafts
    # The bench of the small plan ran and fed the analysis's speed model.
    rows = read_results(out / "bench" / "results.csv")
    assert [(r["method"], r["lang"]) for r in rows] == [
        ("none", "ja"),
        ("none", "en"),
        ("draft_model", "ja"),
        ("draft_model", "en"),
    ]
    speed = summary["runs"][0]["speed"]
    assert speed["draft_cost_source"] == "fitted"
    # One page links it all, with relative links that resolve.
    index = (out / "index.html").read_text(encoding="utf-8")
    for target in ("bench/report.html", "analysis/report.html", "FINDINGS.md", "summary.md"):
        assert f'href="{target}' in index and (out / target).is_file()
    # FINDINGS.md quotes the analysis: its acceptance rates and its verdicts.
    findings = (out / "FINDINGS.md").read_text(encoding="utf-8")
    # A smoke-sized study says so, with the command of the full one, everywhere.
    for text in (proc.stdout, findings, index, (out / "summary.md").read_text("utf-8")):
        assert "smoke-sized" in text.lower() and "tokenlens demo --size full" in text
    for lang in ("ja", "en"):
        assert num(summary["acceptance"][lang]["rate"], "rate") in findings
    # Too few prompts for any verdict: both hypotheses say so, in every output.
    for key in ("H1", "H2"):
        verdict = summary["hypotheses"][key]["verdict"]
        assert verdict == "insufficient_data", summary["hypotheses"][key]
        assert f"{key}: {verdict}" in proc.stdout
        assert f"**{verdict_words(verdict)}**" in findings
        assert f'<span class="verdict {verdict}">{verdict_words(verdict)}</span>' in index
