"""`trace` never hangs, never leaves a run claiming more than it holds, never a traceback
(issue 25): a full disk, Ctrl-C, two writers, a bogus method, a misspelt model, and the
guidance after a kill, on a fake engine.

The fake stands in for :class:`tokenlens.engine.runner.Engine`: it "generates" by
writing the real run's capture (tests/data/run-dm3: step files, the worker's request
map and finished records) for the jobs it is given, so salvage, resume, finalize and
reconciliation run for real on real step files, in the fast suite.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.support import REAL_RUN, REPO, assert_one_line_error, cli, copy_run
from tokenlens.capture.reconcile import counters_from_events
from tokenlens.engine.config import EngineConfig
from tokenlens.engine.results import GenerationResult
from tokenlens.engine.vllm_source import installed_root
from tokenlens.errors import TokenlensError
from tokenlens.rundir import RunWriter, read_run
from tokenlens.salvage import read_finished
from tokenlens.trace import resume_trace

PROMPTS = REPO / "tests" / "data" / "run-dm3.prompts.jsonl"
# The methods and their options are read from the installed vLLM's sources (no import).
NEEDS_SOURCES = pytest.mark.skipif(
    installed_root() is None, reason="needs the installed vLLM's sources"
)
SOURCE = REAL_RUN / "capture"


def _lines(name: str) -> list[dict[str, Any]]:
    path = next(SOURCE.glob(f"{name}-*.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines()]


class FakeEngine:
    """A stand-in engine that replays tests/data/run-dm3's capture for the jobs it is sent.

    ``finish``: which of the jobs get a finished record (default: all); ``then``: called
    after the capture is written (raise there to simulate a death, Ctrl-C, a full disk).
    """

    finish: set[str] | None = None
    then: Callable[[Path], None] | None = None
    started = 0

    def __init__(
        self, config: EngineConfig, log_path: Any = None, progress: Any = None, **_: Any
    ) -> None:
        assert config.trace_dir is not None
        self.trace_dir = Path(config.trace_dir)
        self.info: dict[str, Any] = {"dtype": "torch.float32", "vllm_version": "0.32.0"}

    def __enter__(self) -> FakeEngine:
        FakeEngine.started += 1
        # What vLLM's resolved config says, told apart per start (a resume's engine is
        # another one): the manifest must keep the original's.
        self.info["engine"] = {"model_runner": "fake", "start": FakeEngine.started}
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def generate(self, jobs: list[Any], sampling: Any, concurrency: int = 1) -> GenerationResult:
        wanted = {job.prompt_id for job in jobs}
        finish = wanted if FakeEngine.finish is None else wanted & FakeEngine.finish
        submitted = [r for r in _lines("submitted") if r["request_id"] in wanted]
        internal = {r["internal"] for r in submitted}
        self.trace_dir.mkdir(parents=True, exist_ok=True)
        status = {"state": "recording", "scheduler_class": "vllm.v1.core.sched.Scheduler"}
        (self.trace_dir / "capture-fake-1.json").write_text(json.dumps(status))
        with (self.trace_dir / "submitted-1.jsonl").open("w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in submitted)
        with (self.trace_dir / "steps-fake-1.jsonl").open("w") as fh:
            for line in _lines("steps"):
                line["reqs"] = [r for r in line["reqs"] if r["r"] in internal]
                fh.write(json.dumps(line) + "\n")
        finished = [r for r in _lines("finished") if r["prompt_id"] in finish]
        with (self.trace_dir / "finished-1.jsonl").open("w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in finished)
        if FakeEngine.then is not None:
            FakeEngine.then(self.trace_dir)
        events = read_run(REAL_RUN).events
        assert events is not None
        mine = events.filter(
            pc.is_in(events.column("request_id"), pa.array(sorted(wanted), pa.string()))
        )
        requests = tuple(r for rid, r in read_finished(SOURCE).items() if rid in wanted)
        return GenerationResult(requests, 1.0, counters_from_events(mine), "0.32.0")


# The modules of the trace package that start engines and build their configs.
ENGINE_MODULES = ("tokenlens.trace.run", "tokenlens.trace.resume")


def patch_engine_modules(monkeypatch: pytest.MonkeyPatch, name: str, value: Any) -> None:
    """Set ``name`` in every module of :data:`ENGINE_MODULES` that uses it."""
    import importlib

    for module_name in ENGINE_MODULES:
        module = importlib.import_module(module_name)
        if hasattr(module, name):
            monkeypatch.setattr(module, name, value)


def replace_engine(monkeypatch: pytest.MonkeyPatch, replacement: Any) -> None:
    """Every engine tokenlens.trace would start is ``replacement``: the modules' name and
    any function default that is vLLM's Engine (a backend passed as a parameter)."""
    import importlib
    import inspect

    from tokenlens.engine.runner import Engine

    patch_engine_modules(monkeypatch, "Engine", replacement)
    functions = [
        function
        for module_name in ENGINE_MODULES
        for _, function in inspect.getmembers(
            importlib.import_module(module_name), inspect.isfunction
        )
        if function.__module__ == module_name
    ]
    for function in functions:
        if function.__defaults__ and any(d is Engine for d in function.__defaults__):
            swapped = tuple(replacement if d is Engine else d for d in function.__defaults__)
            monkeypatch.setattr(function, "__defaults__", swapped)
        if function.__kwdefaults__ and Engine in function.__kwdefaults__.values():
            swapped_kw = {
                k: replacement if v is Engine else v for k, v in function.__kwdefaults__.items()
            }
            monkeypatch.setattr(function, "__kwdefaults__", swapped_kw)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeEngine]]:
    """Every engine of tokenlens.trace is the fake; no model is resolved or tokenised."""
    replace_engine(monkeypatch, FakeEngine)
    patch_engine_modules(
        monkeypatch,
        "build_engine_config",
        lambda config, progress=None: EngineConfig(model="fake", max_model_len=4096),
    )
    patch_engine_modules(monkeypatch, "check_prompt_lengths", lambda *a, **k: {})
    patch_engine_modules(monkeypatch, "installed_vllm", lambda: "0.32.0")
    FakeEngine.finish, FakeEngine.then, FakeEngine.started = None, None, 0
    yield FakeEngine
    FakeEngine.finish, FakeEngine.then = None, None


def trace_args(out: Path, *extra: str) -> list[str]:
    return [
        "trace",
        "--prompts",
        str(PROMPTS),
        "--method",
        "draft_model",
        "--k",
        "3",
        "--cap-tokens",
        "24",
        "--logprobs",
        "5",
        "--dtype",
        "float32",
        "--out",
        str(out),
        "--quiet",
        *extra,
    ]


def same_events_as_the_real_run(out: Path) -> None:
    run, real = read_run(out), read_run(REAL_RUN)
    assert run.complete
    assert run.events is not None and real.events is not None
    keys = [("request_id", "ascending"), ("step", "ascending"), ("position", "ascending")]
    # The committed run predates the `k` and `filler` columns (read back as nulls): compare
    # the columns it has, and check the new run's per-step k on its own.
    recorded = pq.read_schema(REAL_RUN / "events.parquet").names
    assert (
        run.events.select(recorded).sort_by(keys).equals(real.events.select(recorded).sort_by(keys))
    )
    assert set(run.events.column("k").to_pylist()) == {3}
    assert run.metrics == real.metrics


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


# -- issue 33: every way a trace can be stopped ends the same way ----------------------------


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
        got, _, err = cli(trace_args(out))
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
    resume_trace(out)
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
    status, _, err = cli(trace_args(whole))
    assert status == 0, err

    def interrupt(_: Path) -> None:
        raise KeyboardInterrupt

    fake.finish, fake.then = {"short-ja"}, interrupt
    out = tmp_path / "run"
    cli(trace_args(out))
    fake.finish, fake.then = None, None
    resume_trace(out)
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
    status, _, err = cli(trace_args(out))
    assert_one_line_error(status, err, "engine worker died", f"trace --resume {out}")
    salvage = read_run(out).manifest["salvage"]
    assert salvage["events_cut"], "the cut should leave a finished request short of its events"
    assert set(salvage["events_cut"]) <= set(salvage["unfinished"])
    analysed = cli(["analyze", str(out), "--out", str(tmp_path / "a"), "--quiet"])
    assert_one_line_error(analysed[0], analysed[2], "partial run", "events cut short")
    fake.then = None
    resume_trace(out)
    manifest = read_run(out).manifest
    assert manifest["resumed"][-1]["events_cut"] == salvage["events_cut"]
    assert manifest["resumed"][-1]["generated_requests"] >= len(salvage["events_cut"])
    same_events_as_the_real_run(out)  # every request whole: the cut ones generated again
