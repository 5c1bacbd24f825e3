"""A real bench of a reduced demo plan on the embedded pair (vLLM CPU).

Baseline and draft model k=3 on one Japanese and one English prompt (n-gram takes the
same bench path and is traced in tests/capture; each engine costs minutes here): the
structure of every output, per-case acceptance equal to vLLM's counter differences,
run directories whose events reconcile, resumption that re-runs only what is missing,
and an analysis of the bench's own run directories.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support import REPO, check_events
from tokenlens.analysis.pipeline import AnalyzeConfig, run_analyze
from tokenlens.bench.measure import CASE_JSON, BenchConfig, BenchResult, run_bench
from tokenlens.bench.results_csv import read_results
from tokenlens.engine.results import SpecCounters
from tokenlens.rundir import read_run

pytestmark = pytest.mark.vllm

PLAN = (REPO / "plans" / "demo-cpu.toml").read_text(encoding="utf-8")


def reduced_plan(tmp: Path) -> Path:
    """The shipped demo plan, cut down: no n-gram, k=3 only for the draft model, 16 tokens."""
    start, end = PLAN.index('name = "ngram"'), PLAN.index('name = "draft"')
    ngram = PLAN[PLAN.rindex("[[method]]", 0, start) : PLAN.rindex("[[method]]", 0, end)]
    text = (
        PLAN.replace("max_tokens = 20", "max_tokens = 16")
        .replace(ngram, "")
        .replace("k = [1, 3, 5]", "k = [3]")
        .replace('path = "../corpora/demo.jsonl"', f'path = "{REPO / "corpora" / "demo.jsonl"}"')
    )
    assert "max_tokens = 16" in text and "k = [3]" in text and '"ngram"' not in text
    path = tmp / "plan.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def bench(pair: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> BenchResult:
    tmp = tmp_path_factory.mktemp("bench")
    return run_bench(BenchConfig(plan=reduced_plan(tmp), out=tmp / "out"))


def test_results_structure(bench: BenchResult) -> None:
    rows = read_results(bench.results_csv)
    assert [r["case_id"] for r in rows] == [
        f"coder-1.5b/{label}/demo/all/{lang}"
        for label in ("baseline", "draft-k3")
        for lang in ("ja", "en")
    ]
    for row in rows:
        assert row["repeats"] == 2 and row["warmup"] == 1 and row["prompts"] == 1
        assert row["output_tokens"] > 0 and row["output_chars"] > 0
        assert row["output_bytes"] >= row["output_chars"]
        for col in ("tok_s", "chars_s", "bytes_s"):
            assert row[f"{col}_min"] <= row[col] <= row[f"{col}_max"]
        assert row["ttft_s"] is not None and 0 < row["ttft_s"] < row["wall_s"]
        assert row["dtype"] == "float32"
        baseline = row["method"] == "none"
        assert (row["num_drafts"] == 0) == baseline
        assert (row["acceptance_rate"] is None) == baseline
        assert row["baseline_case_id"] == f"coder-1.5b/baseline/demo/all/{row['lang']}"
        if baseline:
            assert row["speedup_tok_s"] == 1.0
    md = bench.results_md.read_text(encoding="utf-8")
    assert "JA tok/s" in md and "EN tok/s" in md and "chars/s" in md
    for row in rows:  # every case's median throughput is in the table of its language
        assert f" {row['tok_s']:.1f}" in md
    # The plan the bench ran is kept beside its results, byte for byte.
    assert (bench.out / "plan.toml").read_bytes() == (bench.out.parent / "plan.toml").read_bytes()


def test_acceptance_equals_counter_differences(bench: BenchResult) -> None:
    for row in read_results(bench.results_csv):
        run = read_run(bench.out / row["run_dir"])
        assert run.manifest["status"] == "complete"
        repeats = run.manifest["bench"]["repeats"]
        counters = [SpecCounters.from_json(r["counters"]) for r in repeats]
        # The run directory records the first measured repeat, with its own counters.
        assert run.metrics == counters[0]
        assert row["num_drafts"] == sum(c.num_drafts for c in counters)
        assert row["num_draft_tokens"] == sum(c.num_draft_tokens for c in counters)
        assert row["num_accepted_tokens"] == sum(c.num_accepted_tokens for c in counters)
        if row["method"] != "none":
            total = sum(c.num_accepted_tokens for c in counters)
            assert row["acceptance_rate"] == pytest.approx(
                total / sum(c.num_draft_tokens for c in counters), abs=1e-6
            )
            per_pos = [sum(c.accepted_per_position[j] for c in counters) for j in range(3)]
            assert row["acceptance_per_position"] == pytest.approx(
                [a / row["num_drafts"] for a in per_pos], abs=1e-6
            )
            check_events(run)
        else:
            assert run.events is not None and run.events.num_rows == 0
        # Greedy decoding: every repeat generates the same number of tokens.
        assert len({r["output_tokens"] for r in repeats}) == 1


def test_bench_run_directories_are_analysable(bench: BenchResult, tmp_path: Path) -> None:
    runs = tuple(
        bench.out / "runs" / f"coder-1.5b.draft-k3.demo.all.{lang}" for lang in ("ja", "en")
    )
    result = run_analyze(
        AnalyzeConfig(runs=runs, out=tmp_path / "analysis", n_boot=50, bench=bench.out)
    )
    # The speed model's draft cost is fitted from this bench's step times.
    for section in result.summary["runs"]:
        assert section["speed"]["draft_cost_source"] == "fitted"
        assert section["speed"]["draft_cost_measured"] is True
    # The analysis of a bench case's run directory counts what vLLM counted there.
    for lang, run in zip(("ja", "en"), runs, strict=True):
        counters = read_run(run).metrics
        acceptance = result.summary["acceptance"][lang]
        assert counters.num_draft_tokens > 0
        assert acceptance["n"] == counters.num_draft_tokens
        assert acceptance["rate"] == pytest.approx(
            counters.num_accepted_tokens / counters.num_draft_tokens
        )


def test_resume_runs_only_unfinished_cases(bench: BenchResult, tmp_path: Path) -> None:
    out = tmp_path / "copy"
    shutil.copytree(bench.out, out)
    last = out / "runs" / "coder-1.5b.draft-k3.demo.all.en"
    (last / CASE_JSON).unlink()  # as if interrupted during the last case
    kept = {p: p.stat().st_mtime_ns for p in (out / "runs").glob(f"*/{CASE_JSON}")}
    result = run_bench(BenchConfig(plan=bench.out / "plan.toml", out=out))
    assert result.resumed == 3
    assert {p: p.stat().st_mtime_ns for p in kept} == kept  # finished cases untouched
    assert (last / CASE_JSON).is_file()
    rows = read_results(result.results_csv)
    assert len(rows) == 4
    before = {r["case_id"]: r for r in read_results(bench.results_csv)}
    again = rows[-1]
    assert again["num_drafts"] == before[again["case_id"]]["num_drafts"]
    info = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    assert info["status"] == "complete" and info["cases_done"] == 4
