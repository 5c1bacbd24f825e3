"""Every way a trace can be stopped ends the same way (issue 33): SIGTERM and SIGHUP as
Ctrl-C (salvage, one line with the resume command, exit 143/129), a resume keeps every
manifest field of a finished trace, and a step file cut mid-line never makes a request
finished. On the fake engine of tests/fake_capture.py (real step files, real salvage).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_capture import FakeEngine, fake_engine, same_events_as_the_real_run, trace_args
from tests.support import assert_one_line_error, cli
from tokenlens.errors import TokenlensError
from tokenlens.rundir import read_run
from tokenlens.trace import resume_trace


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeEngine]]:
    yield from fake_engine(monkeypatch)


def _unhandled(number: int, _frame: Any) -> None:
    raise AssertionError(f"signal {number} reached the test: tokenlens did not handle it")


@pytest.mark.parametrize(("name", "status"), [("SIGTERM", 143), ("SIGHUP", 129)])
def test_sigterm_and_sighup_salvage_and_say_how_to_resume(
    fake: type[FakeEngine], tmp_path: Path, name: str, status: int
) -> None:
    """Probe: SIGTERM (timeout, docker stop, Slurm) ended a trace at once, without a
    message or salvage. The signal is real, sent to this process while the fake engine
    generates (the same handler as in a `tokenlens trace` process); then the resumed
    run's manifest keeps the original's dtype and engine facts (it lost them)."""
    number = getattr(signal, name)

    def stop(_: Path) -> None:
        os.kill(os.getpid(), number)
        time.sleep(5)  # the handler raises within this sleep

    fake.finish, fake.then = {"short-ja", "short-en"}, stop
    out = tmp_path / "run"
    previous = signal.signal(number, _unhandled)
    try:
        got, _, err = cli(trace_args(out), FakeEngine)
    finally:
        signal.signal(number, previous)
    assert got == status, err
    assert_one_line_error(got, err, f"stopped by {name}", "2 of 4 requests finished")
    assert f"tokenlens trace --resume {out}" in err
    salvaged = read_run(out).manifest
    assert salvaged["status"] == "partial" and salvaged["salvage"]["finished"] == 2
    assert salvaged["dtype"] == "torch.float32"
    assert salvaged["engine"] == {"model_runner": "fake", "start": 1}
    fake.finish, fake.then = None, None
    resume_trace(out, start=FakeEngine)
    resumed = read_run(out).manifest
    assert resumed["dtype"] == "torch.float32"
    assert resumed["engine"] == {"model_runner": "fake", "start": 1}  # the original's
    assert resumed["resumed"][-1]["engine_facts"]["engine"]["start"] == 2
    same_events_as_the_real_run(out)


def test_a_resumed_run_keeps_every_field_of_a_finished_trace(
    fake: type[FakeEngine], tmp_path: Path
) -> None:
    """Probe: the manifest of a resumed run lost dtype, engine facts, capture, the
    per-request reconciliation, the counters' source (`replay` then asked for a dtype)."""
    whole = tmp_path / "whole"
    status, _, err = cli(trace_args(whole), FakeEngine)
    assert status == 0, err

    def interrupt(_: Path) -> None:
        raise KeyboardInterrupt

    fake.finish, fake.then = {"short-ja"}, interrupt
    out = tmp_path / "run"
    cli(trace_args(out), FakeEngine)
    fake.finish, fake.then = None, None
    resume_trace(out, start=FakeEngine)
    finished, resumed = read_run(whole).manifest, read_run(out).manifest
    lost = sorted(set(finished) - set(resumed) - {"prefix_cache"})  # the fakes report none
    assert lost == [], lost
    for key in ("dtype", "capture", "per_request_reconciliation", "counters_source"):
        assert resumed[key] is not None, key
    assert resumed["counters_source"] == "mixed"  # one request salvaged, three from vLLM


def test_a_step_file_cut_mid_line_is_not_resumed_to_complete(
    fake: type[FakeEngine], tmp_path: Path
) -> None:
    """Probe: a SIGKILL left the step file cut mid-line; the request vLLM had finished
    kept 9 of its 21 events and the resume called the run `complete`. Now the request
    is unfinished (named in the salvage) and the resume generates it again."""

    def die(trace_dir: Path) -> None:
        steps = next(trace_dir.glob("steps-*.jsonl"))
        data = steps.read_bytes()
        cut = data.index(b"\n", len(data) // 2) + 20  # mid-line, past the middle
        steps.write_bytes(data[:cut])
        raise TokenlensError("the engine worker died while trying to generate (exit -9)")

    fake.then = die
    out = tmp_path / "run"
    status, _, err = cli(trace_args(out), FakeEngine)
    assert_one_line_error(status, err, "engine worker died", f"trace --resume {out}")
    salvage = read_run(out).manifest["salvage"]
    assert salvage["events_cut"], "the cut should leave a finished request short of its events"
    assert set(salvage["events_cut"]) <= set(salvage["unfinished"])
    analysed = cli(["analyze", str(out), "--out", str(tmp_path / "a"), "--quiet"])
    assert_one_line_error(analysed[0], analysed[2], "partial run", "events cut short")
    fake.then = None
    resume_trace(out, start=FakeEngine)
    manifest = read_run(out).manifest
    assert manifest["resumed"][-1]["events_cut"] == salvage["events_cut"]
    assert manifest["resumed"][-1]["generated_requests"] >= len(salvage["events_cut"])
    same_events_as_the_real_run(out)  # every request whole: the cut ones generated again
