"""The demo's sizes are what the docs say (no vLLM: configuration and prompt files)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tokenlens.demo import (
    ALL_CORPORA,
    DEFAULT_SIZE,
    FULL_SIZE,
    SIZES,
    full_command,
    smoke_note,
    study_prompts,
    summary_markdown,
    with_note,
)

MIN_PROMPTS = 30  # the verdict rules' minimum per language (docs/analysis.md)


def test_full_size_is_the_documented_study(tmp_path: Path) -> None:
    """docs/study.md: every pair (>= 30 per language), 128-token outputs, one real
    draft-model k=3 trace replayed for both drafters at k = 1..5, one n-gram check."""
    size = SIZES[FULL_SIZE]
    assert size.corpus == ALL_CORPORA and size.limit is None and not size.smoke
    assert size.cap is not None and size.cap >= 128
    assert size.plan is None  # no bench: acceptance, not speed
    assert size.replay is not None
    assert set(size.replay.methods) == {"draft_model", "ngram"}
    assert set(size.replay.ks) >= {1, 2, 3, 4, 5}
    traces = {name: (method, k) for name, method, k in size.traces}
    assert traces[size.replay.source] == ("draft_model", 3)
    assert [traces[name] for name in size.checks] == [("ngram", 3)]

    prompts = [
        json.loads(line)
        for line in study_prompts(size.corpus, tmp_path / "p.jsonl", size.cap)
        .read_text("utf-8")
        .splitlines()
    ]
    langs = Counter(p["lang"] for p in prompts)
    assert set(langs) == {"ja", "en"} and langs["ja"] == langs["en"] >= MIN_PROMPTS
    assert {p["max_tokens"] for p in prompts} == {size.cap}
    assert len({p["id"] for p in prompts}) == len(prompts)
    assert not any(p["id"].startswith("smoke") for p in prompts)
    pairs: dict[str, list[str]] = {}
    for p in prompts:  # every prompt belongs to one JA/EN pair
        pairs.setdefault(p["pair"], []).append(p["lang"])
    assert all(sorted(v) == ["en", "ja"] for v in pairs.values())


def test_default_size_says_it_is_smoke_sized() -> None:
    assert DEFAULT_SIZE == "medium" and SIZES[DEFAULT_SIZE].smoke
    note = smoke_note(DEFAULT_SIZE)
    assert note is not None and "smoke-sized" in note and full_command() in note
    assert smoke_note(FULL_SIZE) is None
    page = with_note("# Findings\n\nbody\n", note)
    assert page.startswith("# Findings\n") and full_command() in page
    assert with_note("# Findings\n", None) == "# Findings\n"


def test_help_teaches_the_sizes_with_wall_times() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tokenlens", "demo", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in SIZES:
        assert f"\n  {name} " in out
    assert "13 min" in out or "~14 min" in out
    assert SIZES[FULL_SIZE].wall in out and "--size full" in out


def test_summary_markdown_separates_replayed_runs_from_traces() -> None:
    """Replayed runs in one table, the real traces they came from in another, each row
    in the table of its kind, every run's signature listed."""
    from tests.support import REAL_RUN, REPO

    replayed, traced = REPO / "tests" / "data" / "run-ngram", REAL_RUN
    text = summary_markdown([replayed], [traced], "note")
    assert "> **Smoke-sized.** note" in text
    head, _, tail = text.partition("Real traces (vLLM's counters):")
    assert "Replayed runs (analysed; counters derived from the events):" in head
    assert "| run-ngram |" in head and "| run-ngram |" not in tail
    assert "| run-dm3 |" in tail and "| run-dm3 |" not in head
    for run in (replayed, traced):
        assert f"`{run.parent.name}/{run.name}`: `" in text
    # Without traces (the smoke sizes): one table, no replay wording, no note.
    plain = summary_markdown([traced])
    assert "| run-dm3 |" in plain and "Real traces" not in plain and "Replayed" not in plain
    assert "Smoke-sized" not in plain


def test_index_shows_the_smoke_note(tmp_path: Path) -> None:
    from tokenlens.report.index import write_index

    note = smoke_note(DEFAULT_SIZE)
    assert note is not None
    page = write_index(tmp_path, None, None, [], None, note=note).read_text("utf-8")
    assert "Smoke-sized." in page and full_command() in page
    assert "Smoke-sized." not in write_index(tmp_path, None, None, [], None).read_text("utf-8")


def test_reuse_keeps_only_a_complete_trace_with_the_same_signature(tmp_path: Path) -> None:
    from dataclasses import replace

    from tokenlens.demo import reusable
    from tokenlens.engine.config import SamplingConfig
    from tokenlens.prompts import read_prompts
    from tokenlens.trace import TraceConfig, manifest_for

    prompts = study_prompts(ALL_CORPORA, tmp_path / "prompts.jsonl", 128)
    trace = TraceConfig(
        prompts=prompts,
        out=tmp_path / "dm3",
        method="draft_model",
        k=3,
        sampling=SamplingConfig(max_tokens=256, logprobs=10),
        dtype="float32",
        cap_tokens=128,
    )
    assert not reusable(trace)  # nothing there
    trace.out.mkdir()
    signature = manifest_for(trace, read_prompts(prompts), "0.32.0")["signature"]
    manifest = {"status": "complete", "signature": signature, "vllm_version": "0.32.0"}
    (trace.out / "manifest.json").write_text(json.dumps(manifest), "utf-8")
    assert reusable(trace)
    assert not reusable(replace(trace, k=2))
    assert not reusable(replace(trace, cap_tokens=64))
    (trace.out / "manifest.json").write_text(json.dumps({**manifest, "status": "partial"}))
    assert not reusable(trace)
