"""Capture for real: events reconcile exactly with vLLM's own counters.

Covers draft model k=5 with 8 concurrent requests, n-gram k=3 with a KV cache too small
for the batch (forced preemption), and an engine SIGKILLed mid-run. (Draft model k=3,
one request at a time, is in tests/test_trace_vllm.py.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support import REPO, check_events, write_prompts
from tokenlens.engine.config import SamplingConfig
from tokenlens.rundir import Run, read_run
from tokenlens.trace import TraceConfig, run_trace

pytestmark = pytest.mark.vllm

TOPICS_JA = [
    "春の花",
    "夏祭り",
    "秋の紅葉",
    "冬の雪景色",
    "日本の鉄道",
    "和食の基本",
    "茶道",
    "温泉",
]
TOPICS_EN = [
    "spring flowers",
    "summer festivals",
    "autumn leaves",
    "winter snow",
    "Japanese railways",
    "washoku basics",
    "tea ceremony",
    "hot springs",
]


def prompts(n_per_lang: int, max_tokens: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for i in range(n_per_lang):
        out.append(
            {
                "id": f"ja-{i}",
                "lang": "ja",
                "pair": f"p{i}",
                "max_tokens": max_tokens,
                "text": f"{TOPICS_JA[i]}について、日本語で2文で説明してください。",
            }
        )
        out.append(
            {
                "id": f"en-{i}",
                "lang": "en",
                "pair": f"p{i}",
                "max_tokens": max_tokens,
                "text": f"Explain {TOPICS_EN[i]} in two sentences, in English.",
            }
        )
    return out


def trace(tmp: Path, method: str, k: int, n_per_lang: int, max_tokens: int, **kw: object) -> Run:
    path = write_prompts(tmp / "p.jsonl", prompts(n_per_lang, max_tokens))
    config = TraceConfig(
        prompts=path,
        out=tmp / "run",
        method=method,
        num_spec=k,
        sampling=SamplingConfig(logprobs=5),
        **kw,
    )  # type: ignore[arg-type]
    return read_run(run_trace(config))


def test_draft_model_k5_eight_concurrent(pair: tuple[Path, Path], tmp_path: Path) -> None:
    run = trace(tmp_path, "draft_model", 5, 4, 16, concurrency=8)
    assert run.requests.num_rows == 8
    assert run.metrics.num_drafts > 0 and len(run.metrics.accepted_per_position) == 5
    assert run.manifest["concurrency"] == 8
    check_events(run)


def test_ngram_k3_under_preemption(pair: tuple[Path, Path], tmp_path: Path) -> None:
    # 8 KV blocks of 32 tokens (vLLM's CPU default is 128-token blocks) hold 256 tokens,
    # far less than 8 requests x (~50 prompt + 48 generated tokens) need at once.
    run = trace(
        tmp_path,
        "ngram",
        3,
        4,
        48,
        concurrency=8,
        max_model_len=160,
        engine_extra={"block_size": 32, "num_gpu_blocks_override": 8},
    )
    assert run.manifest["num_preemptions"] > 0, "the KV cache was not small enough to preempt"
    assert run.metrics.num_drafts > 0
    check_events(run)


def _engine_core(root: int) -> psutil.Process | None:
    for child in psutil.Process(root).children(recursive=True):
        try:
            if "EngineCore" in " ".join(child.cmdline()) or "EngineCore" in child.name():
                return child
        except psutil.Error:
            continue
    return None


def test_sigkill_mid_run_leaves_an_analysable_partial_run(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    path = write_prompts(tmp_path / "p.jsonl", prompts(3, 64))
    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "tokenlens",
        "trace",
        "--prompts",
        str(path),
        "--method",
        "draft_model",
        "--num-spec",
        "3",
        "--out",
        str(out),
        "--quiet",
    ]
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 900
        steps: list[Path] = []
        while time.monotonic() < deadline:
            steps = list((out / "capture").glob("steps-*.jsonl"))
            if steps and sum(1 for _ in steps[0].open()) >= 8:
                break
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            time.sleep(0.5)
        core = _engine_core(proc.pid)
        assert core is not None, "no EngineCore process found"
        os.kill(core.pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "partial run written to" in stderr and "Traceback" not in stderr
    run = read_run(out)
    assert run.manifest["status"] == "partial"
    assert run.events is not None and run.events.num_rows >= 8
    assert run.manifest["capture_gaps"] == []
    check_events(run)
