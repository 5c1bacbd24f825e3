"""A real vLLM engine with tensor_parallel_size=2 on the CPU build, traced end to end.

vLLM's CPU build runs tensor parallelism over two worker processes (gloo and its
shared-memory communicator; one OpenMP core list per rank, which the engine worker
now splits: ``VLLM_CPU_OMP_THREADS_BIND=0|1`` on two cores). One engine core runs the
scheduler; both workers load the plugin and the step timer. The events must reconcile
exactly, the manifest must record the layout and both ranks, and only rank 0 may time
steps. (Data parallelism cannot run in-process: vLLM's ``LLM`` refuses it; pipeline
parallelism with speculative decoding stops inside vLLM's CPU runner: docs/gpu.md.)
Dummy weights, n-gram k=3: about a minute here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import check_events, needs, write_prompts
from tokenlens.capture.layout import IDLE
from tokenlens.engine.config import STEP_TIMER_ENV, SamplingConfig
from tokenlens.rundir import read_run
from tokenlens.trace import TraceConfig, run_trace

PROMPTS: list[dict[str, object]] = [
    {"id": "ja", "lang": "ja", "pair": "p", "text": "一、二、三。一、二、三。一、二、"},
    {"id": "en", "lang": "en", "pair": "p", "text": "one two three one two three one two"},
]


@pytest.mark.vllm
@needs("vllm")
def test_tensor_parallel_trace_reconciles_and_records_both_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STEP_TIMER_ENV, "1")  # a worker-side recorder in every rank
    config = TraceConfig(
        prompts=write_prompts(tmp_path / "p.jsonl", PROMPTS),
        out=tmp_path / "run",
        model="tiny-qwen3",
        method="ngram",
        k=3,
        load_format="dummy",
        chat=False,
        sampling=SamplingConfig(max_tokens=24, logprobs=5, ignore_eos=True),
        max_model_len=1024,
        engine_options={"tensor_parallel_size": 2},
    )
    run = read_run(run_trace(config))
    man = run.manifest
    assert man["status"] == "complete"
    assert man["reconciliation"] == {"exact": True, "differences": []}
    assert man["per_request_reconciliation"]["exact"]
    assert run.metrics.num_drafts > 0
    check_events(run)
    parallel = man["engine"]["parallel"]
    assert (parallel["tensor"], parallel["pipeline"], parallel["data"]) == (2, 1, 1)
    assert parallel["engine_cores"] == 1 and parallel["data_parallel_indices"] == [0]
    timers = [(w["tp"], w["state"]) for w in parallel["worker_ranks"]]
    assert sorted(timers) == [(0, "timing"), (1, IDLE)], parallel["worker_ranks"]
    assert man["engine"]["device"]["workers"] == 2
    assert man["capture"]["engine_processes"] == 1
    capture = run.path / "capture"
    assert len(list(capture.glob("steps-*.jsonl"))) == 1
    assert len(list(capture.glob("steptimes-*.jsonl"))) == 1  # rank 0 only
    lines = (next(capture.glob("steptimes-*.jsonl"))).read_text().splitlines()
    timed = [r for line in lines for r in json.loads(line)["reqs"]]
    # every scheduled draft token timed once (twice if both ranks timed)
    assert sum(r["sd"] for r in timed) == run.metrics.num_draft_tokens
