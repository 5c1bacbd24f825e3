"""`trace` never hangs, never leaves a run claiming more than it holds, never a traceback
(issue 25): a full disk, Ctrl-C, two writers, a bogus method, a misspelt model, and the
guidance after a kill, on a fake engine.

The fake (tests/fake_capture.py) stands in for :class:`tokenlens.engine.runner.Engine`
and writes the real run's capture, so salvage, resume, finalize and reconciliation run
for real on real step files, in the fast suite. SIGTERM and SIGHUP, cut step files and
what a resume keeps (issue 33) are in tests/test_errors_stop.py.
"""

from __future__ import annotations

import errno
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_capture import (
    PROMPTS,
    FakeEngine,
    fake_engine,
    patch_engine_modules,
    replace_engine,
    same_events_as_the_real_run,
    trace_args,
)
from tests.support import assert_one_line_error, cli, copy_run
from tokenlens.engine.vllm_source import installed_root
from tokenlens.errors import TokenlensError
from tokenlens.rundir import RunWriter, read_run
from tokenlens.trace import resume_trace

# The methods and their options are read from the installed vLLM's sources (no import).
NEEDS_SOURCES = pytest.mark.skipif(
    installed_root() is None, reason="needs the installed vLLM's sources"
)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeEngine]]:
    yield from fake_engine(monkeypatch)


def no_space(path: Any, *_: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


def test_the_fake_trace_equals_the_real_run(fake: type[FakeEngine], tmp_path: Path) -> None:
    status, _, err = cli(trace_args(tmp_path / "run"))
    assert status == 0, err
    same_events_as_the_real_run(tmp_path / "run")
    assert read_run(tmp_path / "run").manifest["format_version"] == "1.0"


# -- a full disk ---------------------------------------------------------------------------


def test_full_disk_while_finishing_is_one_line_and_resumable(
    fake: type[FakeEngine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tokenlens.rundir as rundir

    out = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(rundir, "write_events", no_space)
        status, _, err = cli(trace_args(out))
    assert_one_line_error(status, err, "No space left on device", f"trace --resume {out}")
    assert read_run(out).manifest["status"] == "partial"
    resume_trace(out)  # every request finished: no engine needed
    same_events_as_the_real_run(out)


def test_full_disk_while_salvaging_a_dead_engine_is_one_line(
    fake: type[FakeEngine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Probe: the engine dies, then salvage hits the full disk (two chained tracebacks)."""
    import tokenlens.salvage as salvage

    def die(_: Path) -> None:
        raise TokenlensError("the engine worker died while trying to generate (exit -9)")

    fake.then = die
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(salvage, "write_events", no_space)
        status, _, err = cli(trace_args(out))
    assert_one_line_error(
        status, err, "engine worker died", "No space left on device", f"trace --resume {out}"
    )
    fake.then = None
    resume_trace(out)  # salvages now, and keeps the four finished requests
    same_events_as_the_real_run(out)


def test_no_permission_to_write_the_manifest_is_one_line(
    fake: type[FakeEngine], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tokenlens.rundir as rundir

    def denied(path: Path, data: Any) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(rundir, "write_json_atomic", denied)
    status, _, err = cli(trace_args(tmp_path / "run"))
    assert_one_line_error(status, err, "Permission denied", str(tmp_path / "run"))
    assert fake.started == 0


# -- Ctrl-C --------------------------------------------------------------------------------


def test_ctrl_c_salvages_what_finished_and_says_how_to_resume(
    fake: type[FakeEngine], tmp_path: Path
) -> None:
    def interrupt(_: Path) -> None:
        raise KeyboardInterrupt

    fake.finish, fake.then = {"short-ja", "short-en"}, interrupt
    out = tmp_path / "run"
    status, _, err = cli(trace_args(out))
    assert status == 130
    assert_one_line_error(status, err, "interrupted", "2 of 4 requests finished")
    assert f"tokenlens trace --resume {out}" in err
    salvaged = read_run(out)
    assert salvaged.manifest["status"] == "partial"
    assert salvaged.manifest["salvage"]["finished"] == 2
    fake.finish, fake.then = None, None
    resume_trace(out)  # generates only the two that did not finish
    assert read_run(out).manifest["resumed"][-1]["generated_requests"] == 2
    same_events_as_the_real_run(out)


# -- two writers ---------------------------------------------------------------------------


def test_a_second_trace_into_the_same_out_is_refused(
    fake: type[FakeEngine], tmp_path: Path
) -> None:
    """Probe: two `--overwrite` traces into one --out both wrote into one capture/."""
    out = tmp_path / "run"
    second: list[tuple[int, str]] = []

    def start_another(_: Path) -> None:
        fake.then = None  # the second trace, if it got this far, would just generate
        status, _, err = cli(trace_args(out, "--overwrite"))
        second.append((status, err))

    fake.then = start_another
    status, _, err = cli(trace_args(out, "--overwrite"))
    assert status == 0, err
    assert fake.started == 1  # the second never started an engine
    [(status2, err2)] = second
    assert_one_line_error(status2, err2, "another tokenlens is writing", str(out))
    same_events_as_the_real_run(out)  # the first run's events only


def test_resume_is_refused_while_the_trace_runs(tmp_path: Path) -> None:
    run = killed_copy(tmp_path)
    holder = RunWriter.reopen(run)  # a trace writing it right now
    try:
        status, _, err = cli(["trace", "--resume", str(run)])
        assert_one_line_error(status, err, "another tokenlens is writing")
    finally:
        holder.release()


# -- checked before anything starts ---------------------------------------------------------


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("an engine was started")

    replace_engine(monkeypatch, refuse)
    patch_engine_modules(monkeypatch, "build_engine_config", refuse)
    patch_engine_modules(monkeypatch, "installed_vllm", lambda: "0.32.0")


@NEEDS_SOURCES
def test_a_bogus_method_is_refused_before_anything(no_engine: None, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = trace_args(out)
    args[args.index("draft_model")] = "bogus"
    status, _, err = cli(args)
    assert_one_line_error(status, err, "--method 'bogus'", "no speculative method")
    assert not out.exists()


@NEEDS_SOURCES
def test_a_close_method_name_is_suggested(no_engine: None, tmp_path: Path) -> None:
    args = trace_args(tmp_path / "run")
    args[args.index("draft_model")] = "draft-model"
    status, _, err = cli(args)
    assert_one_line_error(status, err, "did you mean 'draft_model'")


@NEEDS_SOURCES
def test_an_unknown_spec_option_is_refused_before_anything(no_engine: None, tmp_path: Path) -> None:
    status, _, err = cli(trace_args(tmp_path / "run", "--spec-option", "prompt_lookup_maxx=3"))
    assert_one_line_error(status, err, "--spec-option prompt_lookup_maxx")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("flag", "name"),
    [
        ("--model", "qwen2.5-coder-1.5b-instrct"),
        ("--draft-model", "./models/no-such-drafter"),
    ],
)
def test_a_model_that_does_not_exist_is_refused_before_anything(
    no_engine: None, tmp_path: Path, flag: str, name: str
) -> None:
    status, _, err = cli(trace_args(tmp_path / "run", flag, name))
    assert_one_line_error(status, err, flag, name)
    assert not (tmp_path / "run").exists()


# -- guidance after a kill -------------------------------------------------------------------


def killed_copy(tmp_path: Path) -> Path:
    """The real run as a kill -9 of its trace leaves it (prompt file beside it)."""
    run = copy_run(tmp_path / "run")
    prompts = tmp_path / "prompts.jsonl"
    shutil.copyfile(PROMPTS, prompts)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["status"] = "partial"
    manifest["trace_config"]["prompts"] = str(prompts)
    for key in ("finished_at", "reconciliation", "timing"):
        manifest.pop(key)
    (run / "manifest.json").write_text(json.dumps(manifest))
    for name in ("requests.parquet", "events.parquet", "metrics.json"):
        (run / name).unlink()
    return run


def test_the_same_command_after_a_kill_points_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Probe: it suggested --overwrite, which discards the finished requests."""
    patch_engine_modules(monkeypatch, "installed_vllm", lambda: "0.32.0")
    run = killed_copy(tmp_path)
    status, _, err = cli(trace_args(run))
    assert_one_line_error(status, err, "did not finish", f"tokenlens trace --resume {run}")


def test_analyze_on_a_killed_run_points_to_resume(tmp_path: Path) -> None:
    """Probe: it said only that requests.parquet is missing."""
    run = killed_copy(tmp_path)
    status, _, err = cli(["analyze", str(run), "--out", str(tmp_path / "out"), "--quiet"])
    assert_one_line_error(status, err, "partial run", f"tokenlens trace --resume {run}")


@pytest.mark.parametrize("typed", ["--k", "--num-spec", "--num"])
def test_resume_names_the_option_the_user_typed(tmp_path: Path, typed: str) -> None:
    """Probe: `--resume RUN --k 5` said "drop --num-spec"."""
    run = killed_copy(tmp_path)
    status, _, err = cli(["trace", "--resume", str(run), typed, "5"])
    shown = "--num-spec" if typed == "--num" else typed
    assert_one_line_error(status, err, f"drop {shown}")
    assert ("--num-spec" in err) == (shown == "--num-spec")


def test_a_partial_replay_is_not_resumed_as_a_trace(tmp_path: Path) -> None:
    """Replays inherit their source's trace_config; resuming one would trace into it."""
    run = killed_copy(tmp_path)
    data = json.loads((run / "manifest.json").read_text())
    data["replayed_from"] = data["signature"]
    (run / "manifest.json").write_text(json.dumps(data))
    status, _, err = cli(["trace", "--resume", str(run)])
    assert_one_line_error(status, err, "it is a replay")
    status, _, err = cli(["analyze", str(run), "--out", str(tmp_path / "out")])
    assert_one_line_error(status, err, "partial run", "replay it again")
    assert "--resume" not in err


def test_a_bad_option_value_is_named_as_typed(tmp_path: Path) -> None:
    status, _, err = cli(trace_args(tmp_path / "run", "--k", "0"))
    assert_one_line_error(status, err, "argument --k:")
    assert "--num-spec" not in err
