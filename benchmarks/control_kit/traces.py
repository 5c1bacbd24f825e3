"""Traces and analyses through the tokenlens command line, as a user runs them.

Every trace is one ``tokenlens trace`` process; they run side by side on one GPU (each
engine takes ``--engine-option gpu_memory_utilization=G``), each with its own vLLM cache
directory so that parallel engine starts never write the same compile cache. A process
still running at the deadline gets SIGINT (tokenlens leaves its run ``partial``,
resumable), then SIGKILL 30 s later. Analyses are ``tokenlens analyze DRAFTER NGRAM``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NGRAM = "ngram"  # the control's run name


@dataclass(frozen=True)
class Job:
    """One command line with its log file."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str]


def trace_argv(
    tl: list[str],
    prompts: Path,
    out: Path,
    drafter: Path | None,
    *,
    k: int,
    dtype: str,
    gpu_mem: float,
    cap_tokens: int,
    extra: list[str],
) -> list[str]:
    """``tokenlens trace`` for a drafter directory (draft_model) or n-gram (``None``)."""
    method = (
        ["--method", "draft_model", "--draft-model", str(drafter)]
        if drafter
        else ["--method", "ngram"]
    )
    return [
        *tl,
        "trace",
        "--prompts",
        str(prompts),
        *method,
        "--k",
        str(k),
        "--dtype",
        dtype,
        "--cap-tokens",
        str(cap_tokens),
        "--engine-option",
        f"gpu_memory_utilization={gpu_mem}",
        *extra,
        "--out",
        str(out),
        "--quiet",
    ]


def analyze_argv(tl: list[str], run: Path, control: Path, prompts: Path, out: Path) -> list[str]:
    return [
        *tl,
        "analyze",
        str(run),
        str(control),
        "--prompts",
        str(prompts),
        "--out",
        str(out),
        "--quiet",
    ]


def run_parallel(
    jobs: list[Job],
    deadline: float,
    *,
    stagger_s: float = 0.0,
    max_parallel: int = 0,
    log: Callable[[str], None] = print,
) -> dict[str, dict[str, Any]]:
    """Run ``jobs`` side by side (at most ``max_parallel`` at once, 0: all) until each
    ends or the deadline; per job: return code, wall time, whether it was stopped."""
    results: dict[str, dict[str, Any]] = {}
    waiting = list(jobs)
    running: dict[str, tuple[subprocess.Popen[bytes], float, Job]] = {}
    while waiting or running:
        while waiting and (max_parallel <= 0 or len(running) < max_parallel):
            if time.monotonic() >= deadline:
                break
            job = waiting.pop(0)
            job.log.parent.mkdir(parents=True, exist_ok=True)
            with job.log.open("wb") as f:
                proc = subprocess.Popen(
                    job.argv,
                    stdout=f,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **job.env},
                    start_new_session=True,
                )
            running[job.name] = (proc, time.monotonic(), job)
            log(f"start {job.name}: {shlex.join(job.argv)}")
            if stagger_s and waiting:
                time.sleep(stagger_s)
        if not running:
            for job in waiting:
                results[job.name] = {"rc": None, "skipped": "deadline before start"}
            break
        for name, (proc, t0, _job) in list(running.items()):
            rc = proc.poll()
            if rc is not None:
                results[name] = {"rc": rc, "wall_s": round(time.monotonic() - t0, 1)}
                log(f"done {name}: rc={rc} in {results[name]['wall_s']} s")
                del running[name]
        if time.monotonic() >= deadline and running:
            procs = [proc for proc, _, _ in running.values()]
            _stop(procs)
            for name, (proc, t0, _job) in running.items():
                results[name] = {
                    "rc": proc.returncode,
                    "wall_s": round(time.monotonic() - t0, 1),
                    "stopped": "deadline",
                }
                log(f"stopped {name} at the deadline")
            running.clear()
        time.sleep(1.0)
    return results


def _stop(procs: list[subprocess.Popen[bytes]], grace_s: float = 30.0) -> None:
    """SIGINT to every process group, then SIGKILL to those still there ``grace_s`` later."""
    for proc in procs:
        _signal(proc, signal.SIGINT)
    end = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL)
            proc.wait()


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
