"""Ctrl-C (and SIGTERM, issue 33) during a real trace: the engine stops, what finished is
salvaged, and the one line (exit 130, 143) names the `--resume` command that completes
the run (issue 25); the resumed run keeps the original's dtype and engine facts.

A tiny weightless MTP model (random weights: acceptance is meaningless, only the
plumbing is asserted) generates six prompts one at a time; SIGINT (what Ctrl-C sends the
foreground process) arrives once the first request finished and the next is under
way. Then nothing of the trace may still run, the run is a salvaged `partial` one, and
`trace --resume` completes it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.support import REPO, check_events, process_gone, write_prompts
from tokenlens.rundir import read_run

pytestmark = pytest.mark.vllm

PROMPTS: list[dict[str, object]] = [
    {"id": f"{lang}-{i}", "lang": lang, "pair": f"p{i}", "text": text}
    for i in range(3)
    for lang, text in (("ja", "日本の四季について説明してください。"), ("en", "Describe Japan."))
]


def _lines(run: Path, pattern: str) -> int:
    return sum(p.read_text(encoding="utf-8").count("\n") for p in (run / "capture").glob(pattern))


@pytest.mark.parametrize(
    ("sent", "status", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "stopped by SIGTERM")],
    ids=["ctrl-c", "sigterm"],
)
def test_ctrl_c_salvages_and_the_run_resumes(
    tmp_path: Path, sent: signal.Signals, status: int, said: str
) -> None:
    """Ctrl-C and SIGTERM (timeout, docker stop, Slurm: issue 33) end the trace alike."""
    prompts = write_prompts(tmp_path / "p.jsonl", PROMPTS)
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "tokenlens", "trace", "--prompts", str(prompts)]
    cmd += ["--model", "tiny-mimo-mtp", "--method", "mtp", "--k", "2"]
    cmd += ["--load-format", "dummy", "--max-tokens", "48", "--concurrency", "1"]
    cmd += ["--logprobs", "2", "--out", str(run), "--quiet"]
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 900  # bounds on waiting for the engine, not speed claims
        while _lines(run, "finished-*.jsonl") < 1:
            assert time.monotonic() < deadline, "no request finished"
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            time.sleep(0.1)
        steps = _lines(run, "steps-*.jsonl")
        while _lines(run, "steps-*.jsonl") < steps + 2:
            assert time.monotonic() < deadline, "the next request never started"
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            time.sleep(0.05)
        pids = [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(recursive=True))]
        os.kill(proc.pid, sent)
        _, stderr = proc.communicate(timeout=120)  # a hang fails here
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == status, stderr[-2000:]
    line = stderr.strip().splitlines()[-1]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert line.startswith(f"tokenlens: error: {said}"), line
    assert f"tokenlens trace --resume {run}" in line, line
    deadline = time.monotonic() + 60
    while not all(process_gone(pid) for pid in pids):
        assert time.monotonic() < deadline, "a process of the trace outlived the interrupt"
        time.sleep(0.2)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "partial"
    assert 1 <= manifest["salvage"]["finished"] < len(PROMPTS)
    assert f"{manifest['salvage']['finished']} of {len(PROMPTS)} requests finished" in line

    resumed = subprocess.run(
        [sys.executable, "-m", "tokenlens", "trace", "--resume", str(run), "--quiet"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    done = read_run(run)
    assert done.complete and done.requests.num_rows == len(PROMPTS)
    for key in ("dtype", "engine"):  # the original engine's, recorded by the salvage
        assert manifest[key] and done.manifest[key] == manifest[key], key
    assert done.manifest["resumed"][-1]["generated_requests"] >= 1
    check_events(done)
