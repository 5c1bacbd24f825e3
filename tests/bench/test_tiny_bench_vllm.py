"""Every method of the original study flows: plan -> vLLM -> trace -> analyze on CPU.

MTP (a tiny MiMo target with one MTP layer) and D-Flash (a tiny Qwen3 target with a
tiny D-Flash drafter) run with vLLM's dummy weights, so acceptance is meaningless; what
is tested is the path: the bench plan is validated against vLLM, the engines run the
methods, each case's run directory reconciles exactly with vLLM's counters, and the
analysis reads them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import REPO, check_events
from tokenlens.analysis.pipeline import AnalyzeConfig, run_analyze
from tokenlens.bench.results_csv import read_results
from tokenlens.bench.run import BenchConfig, run_bench
from tokenlens.rundir import read_run

pytestmark = pytest.mark.vllm

PLAN = """
[bench]
name = "tiny-methods"
warmup = 0
repeats = 1

[sampling]
max_tokens = 16
ignore_eos = true

[[model]]
name = "mimo"
path = "tiny-mimo-mtp"
load_format = "dummy"
methods = ["mtp"]

[[model]]
name = "qwen3"
path = "tiny-qwen3"
load_format = "dummy"
methods = ["dflash"]

[[method]]
name = "mtp"
method = "mtp"
k = 2

[[method]]
name = "dflash"
method = "dflash"
draft_model = "tiny-qwen3-dflash"
k = 3

[[corpus]]
name = "demo"
path = "{corpus}"
limit = 1
"""


def test_mtp_and_dflash_flow_from_plan_to_analysis(tmp_path: Path) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN.format(corpus=REPO / "corpora" / "demo.jsonl"), encoding="utf-8")
    result = run_bench(BenchConfig(plan=plan, out=tmp_path / "bench"))
    rows = read_results(result.results_csv)
    assert [(r["method"], r["k"], r["lang"]) for r in rows] == [
        ("mtp", 2, "ja"),
        ("mtp", 2, "en"),
        ("dflash", 3, "ja"),
        ("dflash", 3, "en"),
    ]
    for row in rows:
        run = read_run(result.out / row["run_dir"])
        assert run.manifest["load_format"] == "dummy"
        assert "weights:dummy" in run.manifest["signature"]
        assert run.metrics.num_drafts > 0
        assert run.metrics.num_draft_tokens == row["k"] * run.metrics.num_drafts
        assert row["output_tokens"] == 16
        check_events(run)
    for method in ("mtp", "dflash"):
        runs = tuple(result.out / r["run_dir"] for r in rows if r["method"] == method)
        analysis = run_analyze(AnalyzeConfig(runs=runs, out=tmp_path / method, n_boot=50))
        assert {r["method"] for r in analysis.summary["runs"]} == {method}
        drafts = sum(read_run(r).metrics.num_draft_tokens for r in runs)
        assert sum(v["n"] for v in analysis.summary["acceptance"].values()) == drafts
