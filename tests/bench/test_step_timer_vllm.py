"""The step timer on vLLM's real V1 runner (the CPU build's ``CPUModelRunner``, a
subclass of ``GPUModelRunner``): one bench of a tiny draft-model case, one engine.

The drafter and target are the weightless tiny models with dummy weights, so only the
plumbing is asserted: the timer installed on V1, timed the drafting call, and the bench
found decode steps inside the measured repeat with a drafting part and a rest.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import write_plan
from tokenlens.bench.config import BenchConfig
from tokenlens.bench.measure import run_bench
from tokenlens.bench_results import read_results
from tokenlens.capture.step_timer import STATUS_PREFIX

PLAN = """
[bench]
warmup = 0
repeats = 1

[sampling]
max_tokens = 16
ignore_eos = true

[[model]]
name = "toy"
path = "tiny-qwen3"
load_format = "dummy"
max_model_len = 512

[[method]]
name = "draft"
method = "draft_model"
draft_model = "tiny-qwen3"
k = 2

[[corpus]]
name = "c"
path = "prompts.jsonl"
langs = ["en"]
lengths = ["medium"]
"""


@pytest.mark.vllm
def test_the_v1_runner_times_steps_and_drafting(tmp_path: Path, tiny_cache: Path) -> None:
    config = BenchConfig(plan=write_plan(tmp_path, PLAN), out=tmp_path / "out", cache=tiny_cache)
    result = run_bench(config)
    (row,) = read_results(result.results_csv)
    statuses = [
        json.loads(p.read_text())
        for p in (tmp_path / "out" / "capture").glob(f"*/{STATUS_PREFIX}-*.json")
    ]
    assert any(s["runner"] == "V1" and s.get("draft") == "timed" for s in statuses), statuses
    assert row["model_runner"] == "V1" and row["async_scheduling"] is False
    assert row["step_timing"] == "perf_counter" and row["timed_steps"] > 0
    assert row["step_ms"] > row["draft_ms"] > 0 and row["verify_ms"] > 0
    assert row["timer_us"] is not None and row["timer_us"] < 1000 * row["step_ms"]
    assert row["speedup_tok_s"] is None and "no baseline" in row["speedup_note"]
