"""A trace killed with kill -9 leaves nothing running, and `trace --resume` completes it.

Issue 16, finding 6: the engine worker runs in its own session, so killing the trace's
process group used to leave vLLM generating into the run directory. One real trace
(embedded pair, draft model k=3, three short prompts one at a time) is killed as soon
as its first request finished and the second is under way; then nothing of it may
survive, the run must be ``partial``, and resuming must give a complete run whose
events reconcile exactly.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.support import REPO, check_events, process_gone, write_prompts
from tokenlens.capture.events import build_capture
from tokenlens.rundir import read_run
from tokenlens.salvage import read_finished

pytestmark = pytest.mark.vllm

PROMPTS = [
    {
        "id": "ja-1",
        "lang": "ja",
        "pair": "p1",
        "text": "富士山について日本語で1文で説明してください。",
    },
    {"id": "en-1", "lang": "en", "pair": "p1", "text": "Describe Mount Fuji in one sentence."},
    {
        "id": "ja-2",
        "lang": "ja",
        "pair": "p2",
        "text": "京都について日本語で1文で説明してください。",
    },
]


@dataclass(frozen=True)
class Killed:
    run: Path
    pids: tuple[int, ...]  # the trace, its engine worker and vLLM's processes


def _lines(run: Path, pattern: str) -> int:
    return sum(p.read_text(encoding="utf-8").count("\n") for p in (run / "capture").glob(pattern))


def _finished_lines(run: Path) -> int:
    return _lines(run, "finished-*.jsonl")


@pytest.fixture(scope="module")
def killed(pair: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Killed:
    tmp = tmp_path_factory.mktemp("killed")
    prompts = write_prompts(tmp / "p.jsonl", PROMPTS)
    run = tmp / "run"
    cmd = [sys.executable, "-m", "tokenlens", "trace", "--prompts", str(prompts)]
    cmd += ["--method", "draft_model", "--num-spec", "3", "--max-tokens", "12"]
    cmd += ["--logprobs", "3", "--concurrency", "1", "--out", str(run), "--quiet"]
    proc = subprocess.Popen(
        cmd,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, as a shell job would be
    )
    try:
        deadline = time.monotonic() + 900
        while _finished_lines(run) < 1:
            assert time.monotonic() < deadline, "no request finished"
            assert proc.poll() is None, "the trace ended before it could be killed"
            time.sleep(0.1)
        steps = _lines(run, "steps-*.jsonl")
        while _lines(run, "steps-*.jsonl") < steps + 2:  # the next request is under way
            assert time.monotonic() < deadline, "the second request never started"
            assert proc.poll() is None, "the trace ended before it could be killed"
            time.sleep(0.05)
        pids = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert len(pids) >= 3, "expected the trace, its worker and vLLM's engine core"
    return Killed(run, tuple(pids))


def test_no_process_of_the_trace_survives(killed: Killed) -> None:
    deadline = time.monotonic() + 60  # a bound on waiting for the kernel, not a speed claim
    while not all(process_gone(pid) for pid in killed.pids):
        alive = [pid for pid in killed.pids if not process_gone(pid)]
        assert time.monotonic() < deadline, f"still running after the kill: {alive}"
        time.sleep(0.2)
    steps = {p: p.stat().st_size for p in (killed.run / "capture").glob("steps-*.jsonl")}
    time.sleep(2)
    assert steps == {p: p.stat().st_size for p in steps}, "step files still grow"


def test_the_killed_run_is_partial(killed: Killed) -> None:
    manifest = json.loads((killed.run / "manifest.json").read_text())
    assert manifest["status"] == "partial"
    assert not (killed.run / "requests.parquet").exists()
    finished = read_finished(killed.run / "capture")
    assert 1 <= len(finished) < len(PROMPTS)
    in_flight = set(build_capture(killed.run / "capture").outputs) - set(finished)
    assert in_flight, "the kill should cut a request off mid-generation"


def test_resume_completes_the_run_and_reconciles(killed: Killed) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tokenlens", "trace", "--resume", str(killed.run), "--quiet"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "run completed in" in proc.stdout
    run = read_run(killed.run)
    assert run.manifest["status"] == "complete"
    rows = {r["request_id"]: r for r in run.requests.to_pylist()}
    assert set(rows) == {p["id"] for p in PROMPTS}
    assert all(r["finish_reason"] in ("stop", "length") for r in rows.values())
    resumed = run.manifest["resumed"][-1]
    assert resumed["salvaged_requests"] >= 1 and resumed["generated_requests"] >= 1
    assert resumed["salvaged_requests"] + resumed["generated_requests"] == len(PROMPTS)
    assert resumed["salvage_gaps"] == []
    # The resumed part against the new engine's own counters, exactly ...
    assert run.manifest["reconciliation"]["exact"] is True
    parts = json.loads((killed.run / "metrics.json").read_text())["parts"]
    assert parts[1]["source"] == "vllm" and parts[1]["num_drafts"] > 0
    # ... and all events against metrics.json (salvaged part + vLLM's), with token identities.
    check_events(run)
