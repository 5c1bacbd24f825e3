"""`trace` never hangs, never leaves a run claiming more than it holds, never a traceback
(issue 25): a full disk, Ctrl-C, two writers, a bogus method, a misspelt model, and the
guidance after a kill.

The engine is the one fake of the suite (:class:`tests.support.FakeVllm`), handed to the
real command line as its engine maker (``tokenlens.cli.main(argv, start)``, the
:class:`~tokenlens.engine.backend.Backend` protocol): it writes what vLLM's worker and
the plugin write, so salvage, resume, finalize and reconciliation run for real on real
step files, in the fast suite. A run that was cut and then resumed must equal the same
trace left alone, event for event.
"""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, FakeVllm, assert_one_line_error, cli, copy_run
from tokenlens.engine.vllm_source import installed_root
from tokenlens.rundir import RunWriter, read_run
from tokenlens.trace import resume_trace

PROMPTS = REPO / "tests" / "data" / "run-dm3.prompts.jsonl"
# The methods and their options are read from the installed vLLM's sources (no import).
NEEDS_SOURCES = pytest.mark.skipif(
    installed_root() is None, reason="needs the installed vLLM's sources"
)


def trace_args(out: Path, cache: Path, *extra: str) -> list[str]:
    """A trace of the four prompts on the tiny models (config files only: the fake
    engine generates), one request at a time so that deaths fall between requests."""
    return [
        "trace",
        "--prompts",
        str(PROMPTS),
        "--model",
        "tiny-qwen3",
        "--method",
        "draft_model",
        "--draft-model",
        "tiny-mimo-mtp",
        "--load-format",
        "dummy",
        "--cache",
        str(cache),
        "--k",
        "3",
        "--cap-tokens",
        "24",
        "--logprobs",
        "5",
        "--concurrency",
        "1",
        "--out",
        str(out),
        "--quiet",
        *extra,
    ]


@pytest.fixture(scope="module")
def reference(
    tmp_path_factory: pytest.TempPathFactory, tiny_cache: Path, module_fake_vllm: None
) -> Path:
    """The same trace, left alone (made once for the module)."""
    out = tmp_path_factory.mktemp("reference") / "run"
    status, _, err = cli(trace_args(out, tiny_cache), FakeVllm())
    assert status == 0, err
    return out


def same_events_as(out: Path, reference: Path) -> None:
    run, ref = read_run(out), read_run(reference)
    assert run.complete
    assert run.events is not None and ref.events is not None
    keys = [("request_id", "ascending"), ("step", "ascending"), ("position", "ascending")]
    assert run.events.sort_by(keys).equals(ref.events.sort_by(keys))
    assert run.metrics == ref.metrics and run.metrics.num_drafts > 0


def no_space(path: Any, *_: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


def test_a_fake_trace_is_complete_and_reconciled(reference: Path) -> None:
    run = read_run(reference)
    assert run.manifest["status"] == "complete" and run.manifest["format_version"] == "1.0"
    assert run.manifest["reconciliation"] == {"exact": True, "differences": []}


# -- a full disk ---------------------------------------------------------------------------


def test_full_disk_while_finishing_is_one_line_and_resumable(
    reference: Path, tmp_path: Path, tiny_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tokenlens.rundir as rundir

    out, fake = tmp_path / "run", FakeVllm()
    with monkeypatch.context() as m:
        m.setattr(rundir, "write_events", no_space)
        status, _, err = cli(trace_args(out, tiny_cache), fake)
    assert_one_line_error(status, err, "No space left on device", f"trace --resume {out}")
    assert read_run(out).manifest["status"] == "partial"
    resume_trace(out, start=fake)  # every request finished: no engine needed
    assert len(fake.started) == 1
    same_events_as(out, reference)


def test_full_disk_while_salvaging_a_dead_engine_is_one_line(
    reference: Path, tmp_path: Path, tiny_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Probe: the engine dies, then salvage hits the full disk (two chained tracebacks)."""
    import tokenlens.salvage as salvage

    out, fake = tmp_path / "run", FakeVllm(die_after={0: 2})
    with monkeypatch.context() as m:
        m.setattr(salvage, "write_events", no_space)
        status, _, err = cli(trace_args(out, tiny_cache), fake)
    assert_one_line_error(
        status, err, "engine died", "No space left on device", f"trace --resume {out}"
    )
    resume_trace(out, start=fake)  # salvages now, keeps the two finished requests
    assert read_run(out).manifest["resumed"][-1]["generated_requests"] == 2
    same_events_as(out, reference)


def test_no_permission_to_write_the_manifest_is_one_line(
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tokenlens.rundir as rundir

    def denied(path: Path, data: Any) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(rundir, "write_json_atomic", denied)
    status, _, err = cli(trace_args(tmp_path / "run", tiny_cache), fake_vllm)
    assert_one_line_error(status, err, "Permission denied", str(tmp_path / "run"))
    assert fake_vllm.started == []


# -- Ctrl-C --------------------------------------------------------------------------------


def test_ctrl_c_salvages_what_finished_and_says_how_to_resume(
    reference: Path, tmp_path: Path, tiny_cache: Path
) -> None:
    out, fake = tmp_path / "run", FakeVllm(die_after={0: 2}, death=KeyboardInterrupt)
    status, _, err = cli(trace_args(out, tiny_cache), fake)
    assert status == 130
    assert_one_line_error(status, err, "interrupted", "2 of 4 requests finished")
    assert f"tokenlens trace --resume {out}" in err
    salvaged = read_run(out)
    assert salvaged.manifest["status"] == "partial"
    assert salvaged.manifest["salvage"]["finished"] == 2
    resume_trace(out, start=fake)  # generates only the two that did not finish
    assert read_run(out).manifest["resumed"][-1]["generated_requests"] == 2
    same_events_as(out, reference)


# -- two writers ---------------------------------------------------------------------------


def test_a_second_trace_into_the_same_out_is_refused(
    reference: Path, tmp_path: Path, tiny_cache: Path
) -> None:
    """Probe: two `--overwrite` traces into one --out both wrote into one capture/."""
    out = tmp_path / "run"
    second: list[tuple[int, str]] = []

    def start_another() -> None:
        second.append(cli(trace_args(out, tiny_cache, "--overwrite"), fake)[::2])

    fake = FakeVllm(during=start_another)
    status, _, err = cli(trace_args(out, tiny_cache, "--overwrite"), fake)
    assert status == 0, err
    assert len(fake.started) == 1  # the second never started an engine
    [(status2, err2)] = second
    assert_one_line_error(status2, err2, "another tokenlens is writing", str(out))
    same_events_as(out, reference)  # the first run's events only


def test_resume_is_refused_while_the_trace_runs(tmp_path: Path) -> None:
    run = killed_copy(tmp_path)
    holder = RunWriter.reopen(run)  # a trace writing it right now
    try:
        status, _, err = cli(["trace", "--resume", str(run)])
        assert_one_line_error(status, err, "another tokenlens is writing")
    finally:
        holder.release()


# -- checked before anything starts ---------------------------------------------------------


def refuse(*_: Any, **__: Any) -> None:
    raise AssertionError("an engine was started")


@NEEDS_SOURCES
def test_a_bogus_method_is_refused_before_anything(tmp_path: Path, tiny_cache: Path) -> None:
    out = tmp_path / "run"
    args = trace_args(out, tiny_cache)
    args[args.index("draft_model")] = "bogus"
    status, _, err = cli(args, refuse)
    assert_one_line_error(status, err, "--method 'bogus'", "no speculative method")
    assert not out.exists()


@NEEDS_SOURCES
def test_a_close_method_name_is_suggested(tmp_path: Path, tiny_cache: Path) -> None:
    args = trace_args(tmp_path / "run", tiny_cache)
    args[args.index("draft_model")] = "draft-model"
    status, _, err = cli(args, refuse)
    assert_one_line_error(status, err, "did you mean 'draft_model'")


@NEEDS_SOURCES
def test_an_unknown_spec_option_is_refused_before_anything(
    tmp_path: Path, tiny_cache: Path
) -> None:
    args = trace_args(tmp_path / "run", tiny_cache, "--spec-option", "prompt_lookup_maxx=3")
    status, _, err = cli(args, refuse)
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
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm, flag: str, name: str
) -> None:
    status, _, err = cli(trace_args(tmp_path / "run", tiny_cache, flag, name), refuse)
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
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm
) -> None:
    """Probe: it suggested --overwrite, which discards the finished requests."""
    run = killed_copy(tmp_path)
    status, _, err = cli(trace_args(run, tiny_cache), refuse)
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
    status, _, err = cli(trace_args(tmp_path / "run", tmp_path, "--k", "0"))
    assert_one_line_error(status, err, "argument --k:")
    assert "--num-spec" not in err
