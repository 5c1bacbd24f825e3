"""The committed full study (reports/full/) agrees with itself: summary.json, FINDINGS,
summary.md and the committed run directories (no vLLM, reads files only)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tokenlens.demo.sizes import FULL_SIZE, SIZES
from tokenlens.format import VERDICT_WORDS
from tokenlens.rundir import read_run

ROOT = Path(__file__).resolve().parents[1]
FULL = ROOT / "reports" / "full"
MIN_PROMPTS = 30

pytestmark = pytest.mark.skipif(not FULL.is_dir(), reason="reports/full/ not committed")


def summary() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FULL / "analysis" / "summary.json").read_text("utf-8"))
    return data


def test_prompts_and_runs_are_the_full_size() -> None:
    s = summary()
    assert s["prompts"]["ja"] >= MIN_PROMPTS and s["prompts"]["en"] >= MIN_PROMPTS
    size = SIZES[FULL_SIZE]
    assert size.replay is not None
    cells = {(r["method"], r["k"]) for r in s["runs"]}
    assert cells == {(m, k) for m in size.replay.methods for k in size.replay.ks}
    assert all(r["replayed"] for r in s["runs"])
    committed = sorted(p.name for p in (FULL / "runs").iterdir() if p.is_dir())
    assert sorted(r["label"] for r in s["runs"]) == committed
    for name in committed:
        run = read_run(FULL / "runs" / name)
        assert run.manifest["status"] == "complete"
        assert f"max{size.cap}" in run.manifest["signature"]
        assert run.requests.num_rows == s["prompts"]["ja"] + s["prompts"]["en"]


def test_per_run_acceptance_matches_the_committed_events() -> None:
    """summary.json's per-run counts are the committed runs' derived counters."""
    for r in summary()["runs"]:
        metrics = read_run(FULL / "runs" / r["label"]).metrics
        acc = r["acceptance"]
        assert sum(acc[lang]["n"] for lang in acc) == metrics.num_draft_tokens
        assert sum(acc[lang]["accepted"] for lang in acc) == metrics.num_accepted_tokens
        assert r["signature"] == read_run(FULL / "runs" / r["label"]).manifest["signature"]


def test_replay_equals_the_committed_real_trace() -> None:
    """Every committed trace against the replayed run of its method and k, as the demo
    recorded it in check.json and as comparing the committed files says again: equal
    wherever the replay knows the draft, and so the same counts.

    The committed study has both real k = 3 traces: the draft-model trace the sweep was
    replayed from and the n-gram check trace (docs/study.md); on the real pair in the
    suite, tests/test_study_vllm.py::test_replayed_events_equal_the_traced_ones_row_for_row.
    """
    from tokenlens.demo.summary import replay_check

    checks = json.loads((FULL / "replay" / "check.json").read_text("utf-8"))
    traces = sorted(p.name for p in (FULL / "traces").iterdir() if p.is_dir())
    assert [c["traced"] for c in checks] == traces == ["draft_model-k3", "ngram-k3"]
    for c in checks:
        assert c == replay_check(FULL / "traces" / c["traced"], FULL / "runs" / c["replayed"])
        assert c["equal_judged"] == c["rows_traced"] == c["rows_replayed"] > 0
        assert c["equal_rows"] + c["unknown_drafts"] == c["rows_traced"]
        traced = read_run(FULL / "traces" / c["traced"]).metrics
        replayed = read_run(FULL / "runs" / c["replayed"]).metrics
        assert replayed == traced  # derived from the replayed events == vLLM's counters
        assert c["acceptance_traced"] == c["acceptance_replayed"] == traced.acceptance_rate


def test_findings_give_the_summary_verdicts() -> None:
    s = summary()
    findings = (FULL / "FINDINGS.md").read_text("utf-8")
    for key, h in s["hypotheses"].items():
        shown = VERDICT_WORDS[h["verdict"]]
        assert re.search(rf"^- {key} \(.*\): \*\*{shown}\*\*", findings, re.M), key
    ja, en = s["prompts"]["ja"], s["prompts"]["en"]
    assert f"Prompts: {ja} Japanese, {en} English" in findings
    assert "Smoke-sized" not in findings
    for name in ("index.html", "summary.md", "wall.json", "analysis/report.html"):
        assert (FULL / name).is_file(), name
