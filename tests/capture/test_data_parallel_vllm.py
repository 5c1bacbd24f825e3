"""Data parallelism for real: `vllm serve --data-parallel-size 2` on the CPU build.

vLLM's in-process ``LLM`` refuses data parallelism, so a data-parallel deployment is
traced through a server: two engine cores (each its own scheduler and worker) behind
one front end, both recording into one trace directory. The events must be the union
of both cores' steps, reconciled exactly with the server's counters summed over its
per-core label sets, and each core's recorded steps must equal its own counter.
Tiny Qwen3 on dummy weights, n-gram k = 3: about three minutes here (two engine starts).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx
import pytest

from tests.capture.test_server_vllm import free_port, serving
from tests.support import REPO, check_events, write_prompts
from tokenlens.engine.config import TRACE_DIR_ENV, SamplingConfig
from tokenlens.engine.results import NUM_DRAFTS
from tokenlens.engine.worker import cpu_thread_env
from tokenlens.rundir import read_run
from tokenlens.trace import TraceConfig, run_trace

pytestmark = pytest.mark.vllm
MODEL = "tiny-qwen3"
PROMPTS: list[dict[str, object]] = [
    {"id": f"{lang}-{i}", "lang": lang, "pair": f"p{i}", "text": text}
    for i, (ja, en) in enumerate(
        [("一、二、三。一、二、三。一、二、", "one two three one two three one two"),
         ("赤、青、赤、青、赤、青、", "red blue red blue red blue red")]
    )
    for lang, text in (("ja", ja), ("en", en))
]  # fmt: skip


def _drafts_per_engine(metrics: str) -> dict[str, int]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, int] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name == f"{NUM_DRAFTS}_total":
                out[sample.labels["engine"]] = int(sample.value)
    return out


def test_two_engine_cores_trace_into_one_run(tmp_path: Path) -> None:
    from tokenlens.models.tiny import ensure_tiny

    trace_dir = tmp_path / "traces"
    port = free_port()
    spec = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4,
            "prompt_lookup_min": 1}  # fmt: skip
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(ensure_tiny(MODEL)), "--served-model-name", MODEL,
        "--load-format", "dummy", "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", "1024", "--enforce-eager", "--kv-cache-memory-bytes", str(1 << 30),
        "--seed", "0", "--data-parallel-size", "2", "--speculative-config", json.dumps(spec),
        "--per-request-spec-decode-metrics", "summary",
    ]  # fmt: skip
    env = {**os.environ, **cpu_thread_env(workers=2), TRACE_DIR_ENV: str(trace_dir)}
    env["PYTHONPATH"] = f"{REPO}:{env.get('PYTHONPATH', '')}"  # this checkout's plugin
    with serving(cmd, env, tmp_path / "serve.log", port, within=900, cwd=REPO) as url:
        config = TraceConfig(
            prompts=write_prompts(tmp_path / "p.jsonl", PROMPTS),
            out=tmp_path / "run",
            model=MODEL,
            tokenizer="qwen2.5",
            method="ngram",
            k=3,
            chat=False,
            sampling=SamplingConfig(max_tokens=24, logprobs=5, ignore_eos=True),
            concurrency=4,
            server=url,
            server_trace_dir=trace_dir,
        )
        run = read_run(run_trace(config))
        per_engine = _drafts_per_engine(httpx.get(f"{url}/metrics", timeout=10).text)
    man = run.manifest
    assert man["status"] == "complete"
    assert man["reconciliation"] == {"exact": True, "differences": []}
    assert man["per_request_reconciliation"]["exact"]
    check_events(run)
    parallel = man["engine"]["parallel"]
    assert parallel["engine_cores"] == 2 and parallel["data_parallel_indices"] == [0, 1]
    assert parallel["data"] == 2  # each dense core says 1; two were seen
    cores = man["capture"]["engine_cores"]
    assert [c["data_index"] for c in cores] == [0, 1]
    # each core recorded what its own counter says (the front end's label "engine")
    assert {str(c["data_index"]): c["steps_with_drafts"] for c in cores} == per_engine
    assert sum(per_engine.values()) == run.metrics.num_drafts
    assert len(list(trace_dir.glob("steps-*.jsonl"))) == 2
