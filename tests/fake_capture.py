"""A fake engine that replays a real run's capture, shared by the trace error tests
(tests/test_errors_trace.py, tests/test_errors_stop.py); not a test module.

The fake stands in for :class:`tokenlens.engine.runner.Engine`: it "generates" by
writing the real run's capture (tests/data/run-dm3: step files, the worker's request
map and finished records) for the jobs it is given, so salvage, resume, finalize and
reconciliation run for real on real step files, in the fast suite.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.support import REAL_RUN, REPO
from tokenlens.capture.reconcile import counters_from_events
from tokenlens.engine.config import EngineConfig
from tokenlens.engine.results import GenerationResult
from tokenlens.rundir import read_run
from tokenlens.salvage import read_finished

PROMPTS = REPO / "tests" / "data" / "run-dm3.prompts.jsonl"
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


def fake_engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeEngine]]:
    """The fake's class state reset, and no model resolved or tokenised (a test module's
    ``fake`` fixture yields from it); the tests hand :class:`FakeEngine` to the command as
    its backend (``cli(argv, FakeEngine)``, ``resume_trace(run, start=FakeEngine)``)."""
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
