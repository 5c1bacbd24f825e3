"""The bench's control flow on a fake engine: engines per case group, warm-ups and
repeats, counters differenced around them, run directories, resumption, progress.

The fake (tests/support.py) stands in for vLLM; the bench code around it is real. A
real engine is benched in tests/capture/test_server_vllm.py (a tiny model behind
``vllm serve``); the plan's vLLM names are checked in tests/bench/test_plan.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support import FakeEngine, FakeVllm, RecordingProgress, check_events, write_plan
from tokenlens.bench.config import BenchConfig
from tokenlens.bench.measure import run_bench
from tokenlens.bench.output import CASE_JSON
from tokenlens.bench.vllm_check import VllmVocabulary
from tokenlens.bench_results import read_results
from tokenlens.engine.results import SpecCounters
from tokenlens.errors import TokenlensError
from tokenlens.rundir import read_run

PLAN = """
[bench]
name = "fake"
warmup = 1
repeats = 2

[sampling]
max_tokens = 12

[[model]]
name = "toy"
path = "tiny-qwen3"
load_format = "dummy"

[[method]]
name = "baseline"
method = "none"

[[method]]
name = "ng"
method = "ngram"
k = [1, 3]

[[method]]
name = "draft"
method = "draft_model"
draft_model = "tiny-mimo-mtp"
k = 3

[[corpus]]
name = "c"
path = "prompts.jsonl"
"""
# The names this plan uses, as vLLM's config definitions list them (the real check of a
# plan against the installed vLLM is in tests/bench/test_plan.py).
VOCABULARY = VllmVocabulary(
    methods=frozenset({"ngram", "draft_model"}),
    speculative_keys=frozenset(),
    engine_keys=frozenset(),
    dtypes=frozenset({"auto"}),
    load_formats=frozenset({"auto", "dummy"}),
    quantizations=frozenset(),
)


@pytest.fixture
def bench_config(
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> BenchConfig:
    monkeypatch.setattr("tokenlens.bench.check.vllm_vocabulary", lambda: VOCABULARY)
    return BenchConfig(plan=write_plan(tmp_path, PLAN), out=tmp_path / "out", cache=tiny_cache)


def test_one_engine_per_method_and_k_and_counters_around_the_repeats(
    bench_config: BenchConfig, fake_vllm: FakeVllm
) -> None:
    progress = RecordingProgress()
    result = run_bench(bench_config, progress, start=fake_vllm)
    rows = read_results(result.results_csv)
    labels = ["baseline", "ng-k1", "ng-k3", "draft-k3"]
    # Cases sharing model, method and k share one engine, started in plan order.
    engines = [(c.speculative.method, c.speculative.num_speculative_tokens)
               if c.speculative else ("none", 0) for c in fake_vllm.started]  # fmt: skip
    assert engines == [("none", 0), ("ngram", 1), ("ngram", 3), ("draft_model", 3)]
    assert [c.trace_dir for c in fake_vllm.started] == [
        str(bench_config.out / "capture" / f"toy.{label}") for label in labels
    ]
    per_label = {label: [r for r in rows if f"/{label}/" in r["case_id"]] for label in labels}
    assert len({len(cases) for cases in per_label.values()}) == 1 and len(rows) >= 4
    requests = sum((1 + 2) * r["prompts"] for r in rows)  # one warm-up, two repeats
    assert progress.stages[-1] == ("bench", requests) and progress.advanced == requests
    for row in rows:
        run = read_run(result.out / row["run_dir"])
        repeats = run.manifest["bench"]["repeats"]
        counters = [SpecCounters.from_json(r["counters"]) for r in repeats]
        assert len(counters) == 2 and run.metrics == counters[0]  # the first measured repeat
        total = sum(counters, SpecCounters())
        assert (row["num_drafts"], row["num_accepted_tokens"]) == (
            total.num_drafts,
            total.num_accepted_tokens,
        )
        if row["method"] == "none":
            assert row["num_drafts"] == 0 and row["acceptance_rate"] is None
            assert run.events is not None and run.events.num_rows == 0
        else:
            assert row["num_drafts"] > 0
            assert row["acceptance_rate"] == pytest.approx(
                total.num_accepted_tokens / total.num_draft_tokens, abs=1e-6
            )  # results.csv keeps six decimals
            check_events(run)  # the first repeat's events against its own counters
        assert len({r["output_tokens"] for r in repeats}) == 1  # greedy: the same each time
        assert row["baseline_case_id"] is not None
    # Warm-ups ran (and were not counted): their requests are in the engines' records.
    submitted = "".join(
        p.read_text() for p in (bench_config.out / "capture").glob("*/submitted-*.jsonl")
    )
    assert ".w0." in submitted and ".r1." in submitted


def test_resume_runs_only_the_unfinished_cases_on_their_engine(
    bench_config: BenchConfig, fake_vllm: FakeVllm
) -> None:
    first = run_bench(bench_config, start=fake_vllm)
    before = {r["case_id"]: r for r in read_results(first.results_csv)}
    runs = bench_config.out / "runs"
    last = sorted(p for p in runs.iterdir() if ".ng-k3." in p.name)[-1]
    (last / CASE_JSON).unlink()  # as if interrupted during this case
    kept = {p: p.stat().st_mtime_ns for p in runs.glob(f"*/{CASE_JSON}")}
    again = FakeVllm()
    result = run_bench(bench_config, start=again)
    assert result.resumed == len(before) - 1
    (engine,) = again.started  # only the interrupted case's engine starts
    assert engine.speculative.method == "ngram" and engine.speculative.num_speculative_tokens == 3
    assert {p: p.stat().st_mtime_ns for p in kept} == kept
    rows = read_results(result.results_csv)
    assert [r["case_id"] for r in rows] == list(before)
    redone = next(r for r in rows if r["run_dir"].endswith(last.name))
    assert redone["num_drafts"] == before[redone["case_id"]]["num_drafts"]
    info = json.loads((bench_config.out / "bench.json").read_text(encoding="utf-8"))
    assert info["status"] == "complete" and info["cases_done"] == len(rows)


def test_an_edited_plan_is_not_resumed_into_old_results(
    bench_config: BenchConfig, fake_vllm: FakeVllm
) -> None:
    run_bench(bench_config, start=fake_vllm)
    bench_config.plan.write_text(PLAN.replace("repeats = 2", "repeats = 3"), encoding="utf-8")
    with pytest.raises(TokenlensError, match="another plan"):
        run_bench(bench_config, start=FakeVllm())
    redo = FakeVllm()
    result = run_bench(replace(bench_config, restart=True), start=redo)
    assert result.resumed == 0 and len(redo.started) == 4
    assert all(r["repeats"] == 3 for r in read_results(result.results_csv))


def test_another_client_on_the_engine_fails_the_case(
    bench_config: BenchConfig, fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counters that moved by more than the case's own repeats (someone else generated)."""
    counters = FakeEngine.counters

    def busier(self: FakeEngine) -> SpecCounters:
        return counters(self) + SpecCounters(self.finished, 0, 0, ())

    monkeypatch.setattr(FakeEngine, "counters", busier)
    with pytest.raises(TokenlensError, match="is another client using the engine"):
        run_bench(bench_config, start=fake_vllm)
    info = json.loads((bench_config.out / "bench.json").read_text(encoding="utf-8"))
    assert info["status"] == "partial"


def test_a_dead_engine_keeps_the_finished_cases(
    bench_config: BenchConfig, fake_vllm: FakeVllm
) -> None:
    fake_vllm.die_after = {2: 1}  # the third engine (ngram k=3) dies in its first case
    with pytest.raises(TokenlensError, match="died"):
        run_bench(bench_config, start=fake_vllm)
    done = sorted(p.parent.name for p in (bench_config.out / "runs").glob(f"*/{CASE_JSON}"))
    assert done and all(".baseline." in d or ".ng-k1." in d for d in done)
    result = run_bench(bench_config, start=FakeVllm())
    assert result.resumed == len(done)


def test_the_bench_run_directories_are_analysable_with_its_speeds(
    bench_config: BenchConfig, fake_vllm: FakeVllm, tmp_path: Path
) -> None:
    from tokenlens.analysis.config import AnalyzeConfig
    from tokenlens.analysis.pipeline import run_analyze

    result = run_bench(bench_config, start=fake_vllm)
    # The plan the bench ran is kept beside its results, byte for byte.
    assert (result.out / "plan.toml").read_bytes() == bench_config.plan.read_bytes()
    rows = [r for r in read_results(result.results_csv) if r["method"] == "draft_model"]
    runs = tuple(result.out / r["run_dir"] for r in rows)
    analysis = run_analyze(
        AnalyzeConfig(runs=runs, out=tmp_path / "analysis", n_boot=50, bench=result.out)
    )
    # The speed model's draft cost is fitted from this bench's speeds.
    for section in analysis.summary["runs"]:
        assert section["speed"]["draft_cost_source"] == "fitted"
        assert section["speed"]["draft_cost_measured"] is True
    # The analysis of the cases' run directories counts what the engine counted there.
    for row, run in zip(rows, runs, strict=True):
        counters = read_run(run).metrics
        acceptance = analysis.summary["acceptance"][row["lang"]]
        assert acceptance["n"] == counters.num_draft_tokens > 0
        assert acceptance["rate"] == pytest.approx(
            counters.num_accepted_tokens / counters.num_draft_tokens
        )


LAGGING_PLAN = """
[bench]
warmup = 0
repeats = 1

[sampling]
max_tokens = 12

[[model]]
name = "toy"
path = "tiny-qwen3"
load_format = "dummy"

[[method]]
name = "draft"
method = "draft_model"
draft_model = "tiny-mimo-mtp"
k = 3

[[corpus]]
name = "c"
path = "prompts.jsonl"
"""


def test_a_step_still_in_the_engines_writer_is_waited_for(
    bench_config: BenchConfig, tmp_path: Path
) -> None:
    """vLLM's writer thread hands a case's last step to the file after generate returns
    (CI once read the files first: events one draft short of vLLM's counters)."""
    config = replace(bench_config, plan=write_plan(tmp_path, LAGGING_PLAN))
    result = run_bench(config, start=FakeVllm(lag=0.5))
    rows = read_results(result.results_csv)
    assert rows and all(r["num_drafts"] > 0 for r in rows)
    for row in rows:
        run = read_run(result.out / row["run_dir"])
        assert run.manifest["reconciliation"] == {"exact": True, "differences": []}
        check_events(run)
