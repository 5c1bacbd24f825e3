"""Like-for-like speed-ups, the step split and --compare-plain, on the fake engine.

The fake (tests/support.py) resolves runners as vLLM 0.25 does on a GPU (a baseline on
V2 with async scheduling, speculative methods on V1 without it, unless forced) and
writes the step timer's lines with fixed made-up times (a target step 10 ms, each
drafted token 4 ms), so the medians are known exactly; everything after the engine is
the real bench code. Warnings and their wording are checked on made-up rows.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.support import FakeVllm, write_plan
from tokenlens.bench.config import BenchConfig
from tokenlens.bench.measure import run_bench
from tokenlens.bench.results_md import results_markdown
from tokenlens.bench.rows import slowdown_warning, with_speedups
from tokenlens.bench.vllm_check import VllmVocabulary
from tokenlens.bench_results import (
    BENCH_JSON,
    COLUMN_NAMES,
    FIRST_COLUMNS,
    SECOND_COLUMNS,
    read_results,
    write_results,
)

PLAN = """
[bench]
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
{v1}
[[method]]
name = "draft"
method = "draft_model"
draft_model = "tiny-mimo-mtp"
k = 3

[[corpus]]
name = "c"
path = "prompts.jsonl"
langs = ["ja"]
lengths = ["medium"]
"""
V1_BASELINE = """
[[method]]
name = "baseline-v1"
method = "none"
env = { VLLM_USE_V2_MODEL_RUNNER = "0" }
engine = { async_scheduling = false }
"""
CACHE: list[Path] = []  # the tiny models' cache (the fixture below sets it)
VOCABULARY = VllmVocabulary(
    methods=frozenset({"draft_model"}),
    speculative_keys=frozenset(),
    engine_keys=frozenset({"async_scheduling"}),
    dtypes=frozenset({"auto"}),
    load_formats=frozenset({"auto", "dummy"}),
    quantizations=frozenset(),
)


def _bench(tmp_path: Path, fake: FakeVllm, v1: bool, plain: tuple[str, ...] = ()) -> list:
    fake.gpu_runners = True
    plan = write_plan(tmp_path, PLAN.format(v1=V1_BASELINE if v1 else ""))
    config = BenchConfig(plan=plan, out=tmp_path / "out", cache=CACHE[0], compare_plain=plain)
    result = run_bench(config, start=fake)
    return read_results(result.results_csv)


@pytest.fixture(autouse=True)
def _vocabulary(monkeypatch: pytest.MonkeyPatch, tiny_cache: Path, fake_vllm: FakeVllm) -> None:
    monkeypatch.setattr("tokenlens.bench.check.vllm_vocabulary", lambda: VOCABULARY)
    CACHE[:] = [tiny_cache]


def test_speedup_divides_by_the_baseline_on_the_same_runner(
    tmp_path: Path, fake_vllm: FakeVllm
) -> None:
    rows = {r["method_label"]: r for r in _bench(tmp_path, fake_vllm, v1=True)}
    base, v1, draft = rows["baseline"], rows["baseline-v1"], rows["draft"]
    assert (base["model_runner"], base["async_scheduling"]) == ("V2", True)
    assert (v1["model_runner"], v1["async_scheduling"]) == ("V1", False)
    assert (draft["model_runner"], draft["async_scheduling"]) == ("V1", False)
    # the forced baseline's engine got the plan's env and engine argument
    forced = [c for c in fake_vllm.started if c.env.get("VLLM_USE_V2_MODEL_RUNNER") == "0"]
    assert len(forced) == 1 and forced[0].extra["async_scheduling"] is False
    assert draft["baseline_case_id"] == v1["case_id"]
    assert draft["speedup_tok_s"] == pytest.approx(draft["tok_s"] / v1["tok_s"], rel=1e-4, abs=1e-6)
    assert draft["speedup_note"] is None
    # the step split: fixed fake times, medians over decode steps only
    assert base["step_ms"] == pytest.approx(10.0) and base["draft_ms"] is None
    assert draft["step_ms"] == pytest.approx(22.0) and draft["draft_ms"] == pytest.approx(12.0)
    assert draft["verify_ms"] == pytest.approx(10.0)
    assert draft["baseline_step_ms"] == pytest.approx(10.0)
    assert draft["draft_target_steps"] == pytest.approx(1.2)
    assert draft["draft_cost"] == pytest.approx(0.4)
    assert draft["step_timing"] == "perf_counter" and draft["timed_steps"] > 0
    assert draft["timer_us"] == pytest.approx(20.0)
    text = (tmp_path / "out" / "results.md").read_text(encoding="utf-8")
    assert "| draft | 3 | V1, async off |" in text and "| baseline-v1 |" in text
    assert "| draft | 3 | ja | V1, async off | 22.00 | 12.00 | 10.00 |" in text


def test_no_speedup_across_runners_and_the_reason_is_named(
    tmp_path: Path, fake_vllm: FakeVllm
) -> None:
    rows = {r["method_label"]: r for r in _bench(tmp_path, fake_vllm, v1=False)}
    draft = rows["draft"]
    assert draft["speedup_tok_s"] is None and draft["baseline_case_id"] is None
    assert "no baseline ran on V1, async off" in draft["speedup_note"]
    assert "baseline (V2, async on)" in draft["speedup_note"]
    assert draft["draft_cost"] is None  # no like-for-like target step to divide by
    text = (tmp_path / "out" / "results.md").read_text(encoding="utf-8")
    assert "no baseline ran on V1, async off" in text


def test_compare_plain_runs_the_chosen_case_without_the_plugin(
    tmp_path: Path, fake_vllm: FakeVllm
) -> None:
    rows = _bench(tmp_path, fake_vllm, v1=True, plain=("*/draft-k3/*",))
    plain_engines = [c for c in fake_vllm.started if c.trace_dir is None]
    assert len(plain_engines) == 1 and plain_engines[0].env["VLLM_PLUGINS"] == ""
    assert "TOKENLENS_STEP_TIMER" not in plain_engines[0].env
    assert plain_engines[0].speculative is not None
    by = {r["method_label"]: r for r in rows}
    assert by["baseline"]["plain_tok_s"] is None
    draft = by["draft"]
    assert draft["plain_tok_s"] > 0
    assert draft["traced_over_plain"] == pytest.approx(
        draft["tok_s"] / draft["plain_tok_s"], rel=1e-4, abs=1e-6
    )  # results.csv keeps six decimals
    assert draft["plain_same_session"] is True and draft["session"]
    text = (tmp_path / "out" / "results.md").read_text(encoding="utf-8")
    assert "### Traced vs plain" in text and "Not like for like" not in text
    # resuming with the same option measures nothing again
    again = FakeVllm(gpu_runners=True)
    config = BenchConfig(
        plan=tmp_path / "plan.toml",
        out=tmp_path / "out",
        cache=CACHE[0],
        compare_plain=("*/draft-k3/*",),
    )
    run_bench(config, start=again)
    assert again.started == []


def test_a_resumed_bench_says_which_ratios_mix_invocations(
    tmp_path: Path, fake_vllm: FakeVllm
) -> None:
    first = {r["method_label"]: r for r in _bench(tmp_path, fake_vllm, v1=True)}
    assert first["draft"]["speedup_note"] is None  # one invocation: like for like
    # the same bench resumed later (another host or day, say) with --compare-plain
    config = BenchConfig(
        plan=tmp_path / "plan.toml", out=tmp_path / "out", cache=CACHE[0],
        compare_plain=("*/draft-k3/*",),
    )  # fmt: skip
    rows = read_results(run_bench(config, start=FakeVllm(gpu_runners=True)).results_csv)
    draft = {r["method_label"]: r for r in rows}["draft"]
    assert draft["plain_same_session"] is False and draft["traced_over_plain"] is not None
    text = (tmp_path / "out" / "results.md").read_text(encoding="utf-8")
    assert "| **no** |" in text and "**Not like for like** where *one invocation*" in text


def test_a_results_csv_from_before_sessions_does_not_claim_another_invocation(
    tmp_path: Path, fake_vllm: FakeVllm
) -> None:
    _bench(tmp_path, fake_vllm, v1=True, plain=("*/draft-k3/*",))
    out = tmp_path / "out"
    path = out / "results.csv"
    n = len(SECOND_COLUMNS)  # the file as a bench before sessions wrote it
    with path.open(newline="", encoding="utf-8") as fh:
        cut = [cells[:n] for cells in csv.reader(fh)]
    with path.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows(cut)
    rows = read_results(path)
    draft = next(r for r in rows if r["method_label"] == "draft")
    assert draft["plain_tok_s"] is not None and draft["plain_same_session"] is None
    text = results_markdown(rows, json.loads((out / BENCH_JSON).read_text(encoding="utf-8")))
    line = next(x for x in text.splitlines() if x.startswith("| draft | 3 | ja |") and "| – |" in x)
    assert line.endswith("| – |") and "**no**" not in text and "Not like for like" not in text


def test_a_speedup_across_bench_invocations_carries_a_caveat() -> None:
    base = _row("base", "none", 0, 10.0, session="host-a/1/x@t1")
    same = _row("d", "draft_model", 3, 20.0, session="host-a/1/x@t1")
    other = _row("d", "draft_model", 3, 20.0, session="host-b/2/y@t2")
    unrecorded = _row("d", "draft_model", 3, 20.0)
    assert with_speedups([base, same])[1]["speedup_note"] is None
    for row in (other, unrecorded):  # a row without a session came from an older bench
        (_, out) = with_speedups([base, row])
        assert out["speedup_tok_s"] == pytest.approx(2.0)
        assert "another bench invocation than its baseline" in out["speedup_note"]
    # two rows from before sessions were recorded: nothing to tell them apart by
    old = _row("base", "none", 0, 10.0)
    assert with_speedups([old, unrecorded])[1]["speedup_note"] is None
    # of two like-for-like baselines, the one of the same invocation is used
    elsewhere = _row("base2", "none", 0, 5.0, session="host-b/2/y@t2")
    assert with_speedups([elsewhere, base, same])[2]["baseline_case_id"] == base["case_id"]


def _row(label: str, method: str, k: int, tok_s: float, **extra: object) -> dict:
    row = dict.fromkeys(COLUMN_NAMES)
    row.update(
        case_id=f"m/{label}/c/all/ja", model="m", corpus="c", length="", lang="ja",
        concurrency=1, method_label=label, method=method, k=k, tok_s=tok_s, chars_s=tok_s,
        model_runner="V1", async_scheduling=False, mean_acceptance_length=2.8,
    )  # fmt: skip
    row.update(extra)
    return row


def test_a_slower_case_names_the_part_of_the_step_that_costs() -> None:
    base = _row("base", "none", 0, 370.0, step_ms=2.7)
    drafty = _row("draft", "draft_model", 3, 55.0, step_ms=52.0, draft_ms=46.0, verify_ms=6.0)
    verifying = _row("ngram", "ngram", 3, 300.0, step_ms=9.0, draft_ms=0.5, verify_ms=8.5)
    fast = _row("ok", "ngram", 3, 400.0, step_ms=3.0, draft_ms=0.1, verify_ms=2.9)
    out = {r["method_label"]: r for r in with_speedups([base, drafty, verifying, fast])}
    assert out["draft"]["warning"] == (
        "draft k=3 (V1, async off) runs at 0.15x the tok/s of base: drafting takes 46.0 ms "
        "of a 52.0 ms step: the drafter costs 17.0 target steps of 2.70 ms, and a step "
        "yields 2.80 tokens"
    )
    assert out["draft"]["draft_cost"] == pytest.approx(46.0 / 2.7 / 3)
    assert (
        "verification takes 8.50 ms of a 9.00 ms step, 3.1 target steps"
        in (out["ngram"]["warning"])
    )
    assert out["ok"]["warning"] is None and out["base"]["warning"] is None
    from tokenlens.bench.results_md import results_markdown

    text = results_markdown(list(out.values()))
    assert "- **Slower than its baseline**: draft k=3 (V1, async off) runs at 0.15x" in text
    assert "| draft | 3 | ja | V1, async off | 52.00 | 46.00 | 6.00 | 2.80 | 17.04 | 5.68 |" in text
    unsplit = _row("d2", "draft_model", 3, 55.0, step_timing="step timer refused: x")
    (_, row) = with_speedups([base, unsplit])
    assert row["warning"].endswith("the step split is unavailable: step timer refused: x")
    assert slowdown_warning(row, None) is None


@pytest.mark.parametrize("columns", [FIRST_COLUMNS, SECOND_COLUMNS], ids=["first", "second"])
def test_results_csv_of_earlier_formats_still_reads(tmp_path: Path, columns: tuple) -> None:
    path = tmp_path / "results.csv"
    write_results(path, [_row("base", "none", 0, 10.0)])
    lines = path.read_text(encoding="utf-8").splitlines()
    n = len(columns)
    old = [",".join(line.split(",")[:n]) for line in lines]  # no quoted commas here
    path.write_text("\n".join(old) + "\n", encoding="utf-8")
    (row,) = read_results(path)
    assert row["tok_s"] == 10.0 and row["session"] is None and row["plain_same_session"] is None
    if columns == FIRST_COLUMNS:
        assert row["model_runner"] is None and row["warning"] is None
    else:
        assert row["model_runner"] == "V1"


def test_plans_give_methods_engine_options_env_and_corpora_concurrencies(tmp_path: Path) -> None:
    from tokenlens.bench.plan import load_plan
    from tokenlens.errors import TokenlensError

    text = PLAN.format(v1=V1_BASELINE).replace(
        'lengths = ["medium"]', 'lengths = ["medium"]\nconcurrency = [1, 32]'
    )
    plan = load_plan(write_plan(tmp_path, text))
    ids = [c.case_id for c in plan.cases]
    assert ids[:2] == ["toy/baseline/c/medium/ja/c1", "toy/baseline/c/medium/ja/c32"]
    assert [c.concurrency for c in plan.cases] == [1, 32] * 3
    (v1,) = [m for m in plan.methods if m.name == "baseline-v1"]
    assert v1.env == {"VLLM_USE_V2_MODEL_RUNNER": "0"} and v1.engine == {"async_scheduling": False}
    assert plan.concurrencies == (1, 32)
    # one concurrency: case ids as before
    assert load_plan(write_plan(tmp_path, PLAN.format(v1=""))).cases[0].case_id == (
        "toy/baseline/c/medium/ja"
    )
    for bad, message in (
        ('env = { VLLM_USE_V2_MODEL_RUNNER = "0" }', "env.VLLM_USE_V2_MODEL_RUNNER: expected a"),
        ("engine = { async_scheduling = false }", "engine.model: tokenlens sets it"),
    ):
        broken = V1_BASELINE.replace(
            bad, bad.replace('"0"', "0").replace("async_scheduling", "model")
        )
        with pytest.raises(TokenlensError, match=message):
            load_plan(write_plan(tmp_path, PLAN.format(v1=broken)))
