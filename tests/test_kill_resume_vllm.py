"""SIGKILL and resume on real vLLM engines (the tiny MTP model, dummy weights).

One run, three engines, in order: the trace's engine core is SIGKILLed mid-run (the
trace survives it and leaves an analysable partial run); the first ``trace --resume``
is killed with its whole process group (issue 16, finding 6: the engine worker runs in
its own session, so nothing of it may survive either); the second resume completes the
run, and its events reconcile exactly with the new engine's counters.

What the real engine adds to the fake-engine tests of tests/test_trace_control.py:
vLLM's processes dying for real, the worker noticing, and files written by processes
that were killed. Random weights make the outputs meaningless; only the plumbing is
asserted. EOS is ignored (random weights may pick it at once) and outputs are long
enough that each request takes a few seconds, so that the kills land mid-run.
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
    {"id": f"{lang}-{i}", "lang": lang, "pair": f"p{i}",
     "text": f"富士山について{i}文で。" if lang == "ja" else f"Mount Fuji in {i} sentences."}
    for i in range(1, 7)
    for lang in ("ja", "en")
]  # fmt: skip
# Twelve requests, so that neither kill can come after the last one has finished: with
# six, on a fast machine, the first resume once finished every request left to it
# before its kill landed, and the last resume had nothing to do (CI, 2026-12-05).
# The trace as `tokenlens trace` runs it (the CLI has no --ignore-eos): errors as one
# line on stderr, a non-zero exit.
TRACE = """
import sys
from pathlib import Path
from tokenlens.engine.config import SamplingConfig
from tokenlens.errors import TokenlensError
from tokenlens.trace import TraceConfig, run_trace
try:
    run_trace(TraceConfig(
        prompts=Path(sys.argv[1]), out=Path(sys.argv[2]), model="tiny-mimo-mtp",
        method="mtp", k=2, load_format="dummy", concurrency=1,
        sampling=SamplingConfig(max_tokens=256, ignore_eos=True),
    ))
except TokenlensError as exc:
    sys.exit(f"tokenlens: error: {exc}")
"""
DEADLINE = 600  # seconds: a bound on waiting for the engine, not a speed claim


def _lines(directory: Path, pattern: str) -> int:
    return sum(p.read_text(encoding="utf-8").count("\n") for p in directory.glob(pattern))


def _wait_mid_run(proc: subprocess.Popen[str], capture: Path) -> None:
    """Until one request finished and the next one is under way."""
    deadline = time.monotonic() + DEADLINE
    while _lines(capture, "finished-*.jsonl") < 1:
        assert time.monotonic() < deadline, "no request finished"
        assert proc.poll() is None, "the trace ended before it could be killed"
        time.sleep(0.1)
    steps = _lines(capture, "steps-*.jsonl")
    while _lines(capture, "steps-*.jsonl") < steps + 4:
        assert time.monotonic() < deadline, "the next request never started"
        assert proc.poll() is None, "the trace ended before it could be killed"
        time.sleep(0.05)


def _engine_core(root: int) -> psutil.Process | None:
    for child in psutil.Process(root).children(recursive=True):
        try:
            if "EngineCore" in " ".join(child.cmdline()) or "EngineCore" in child.name():
                return child
        except psutil.Error:
            continue
    return None


@dataclass(frozen=True)
class Killed:
    run: Path
    returncode: int
    stderr: str


@pytest.fixture(scope="module")
def engine_killed(tmp_path_factory: pytest.TempPathFactory) -> Killed:
    tmp = tmp_path_factory.mktemp("killed")
    prompts = write_prompts(tmp / "p.jsonl", PROMPTS)
    run = tmp / "run"
    proc = subprocess.Popen(
        [sys.executable, "-c", TRACE, str(prompts), str(run)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_mid_run(proc, run / "capture")
        core = _engine_core(proc.pid)
        assert core is not None, "no EngineCore process found"
        os.kill(core.pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    return Killed(run, proc.returncode, stderr)


def test_a_killed_engine_leaves_an_analysable_partial_run(engine_killed: Killed) -> None:
    assert engine_killed.returncode != 0
    assert "partial run written to" in engine_killed.stderr, engine_killed.stderr[-2000:]
    assert "Traceback" not in engine_killed.stderr
    run = read_run(engine_killed.run)
    assert run.manifest["status"] == "partial"
    assert run.manifest["capture_gaps"] == []
    assert run.events is not None and run.events.num_rows > 0
    finished = read_finished(engine_killed.run / "capture")
    assert 1 <= len(finished) < len(PROMPTS)
    assert run.manifest["salvage"]["unfinished"], "the kill should cut a request off"
    check_events(run)  # the salvaged events against the counts derived from them


@dataclass(frozen=True)
class GroupKilled:
    run: Path
    pids: tuple[int, ...]  # the resume, its engine worker and vLLM's processes


@pytest.fixture(scope="module")
def resume_killed(engine_killed: Killed) -> GroupKilled:
    run = engine_killed.run
    proc = subprocess.Popen(
        [sys.executable, "-m", "tokenlens", "trace", "--resume", str(run), "--quiet"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own process group, as a shell job would be
    )
    try:
        attempt = run / "capture" / "resume-1"
        deadline = time.monotonic() + DEADLINE
        while not attempt.is_dir():
            assert time.monotonic() < deadline and proc.poll() is None, "no resume started"
            time.sleep(0.1)
        _wait_mid_run(proc, attempt)
        pids = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert len(pids) >= 3, "expected the trace, its worker and vLLM's engine core"
    return GroupKilled(run, tuple(pids))


def test_nothing_of_a_killed_process_group_survives(resume_killed: GroupKilled) -> None:
    deadline = time.monotonic() + 60  # a bound on waiting for the kernel, not a speed claim
    while not all(process_gone(pid) for pid in resume_killed.pids):
        alive = [pid for pid in resume_killed.pids if not process_gone(pid)]
        assert time.monotonic() < deadline, f"still running after the kill: {alive}"
        time.sleep(0.2)
    capture = resume_killed.run / "capture" / "resume-1"
    steps = {p: p.stat().st_size for p in capture.glob("steps-*.jsonl")}
    time.sleep(2)
    assert steps == {p: p.stat().st_size for p in steps}, "step files still grow"
    manifest = json.loads((resume_killed.run / "manifest.json").read_text())
    assert manifest["status"] == "partial"
    in_flight = set(build_capture(capture).outputs) - set(read_finished(capture))
    assert in_flight, "the kill should cut a request off mid-generation"


def test_resume_completes_the_run_and_reconciles(resume_killed: GroupKilled) -> None:
    run_dir = resume_killed.run
    proc = subprocess.run(
        [sys.executable, "-m", "tokenlens", "trace", "--resume", str(run_dir), "--quiet"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "run completed in" in proc.stdout
    run = read_run(run_dir)
    assert run.manifest["status"] == "complete"
    rows = {r["request_id"]: r for r in run.requests.to_pylist()}
    assert set(rows) == {p["id"] for p in PROMPTS}
    assert all(r["finish_reason"] == "length" for r in rows.values())  # EOS ignored
    resumed = run.manifest["resumed"][-1]
    assert resumed["capture"] == "capture/resume-2"
    assert resumed["salvaged_requests"] >= 2 and resumed["generated_requests"] >= 1
    assert resumed["salvaged_requests"] + resumed["generated_requests"] == len(PROMPTS)
    assert resumed["salvage_gaps"] == []
    # The resumed part against the new engine's own counters, exactly ...
    assert run.manifest["reconciliation"]["exact"] is True
    parts = json.loads((run_dir / "metrics.json").read_text())["parts"]
    assert parts[1]["source"] == "vllm" and parts[1]["num_drafts"] > 0
    # ... and all events against metrics.json (salvaged part + vLLM's), with token identities.
    check_events(run)
