"""Trace's control flow on a fake engine: the run, its counters, progress, death, resume.

:class:`tests.support.FakeEngine` writes what vLLM's worker and the plugin write (step
files, finished records, a capture status) from a toy target and drafter, so that
everything after the engine (finalize, reconciliation, salvage, resume) is the real
code. What the real engine does is proven in tests/test_study_vllm.py (the real pair)
and tests/test_tiny_engines_vllm.py (kills, resume and preemption on tiny models).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support import FakeVllm, RecordingProgress, check_events, toy_prompt_ids, write_prompts
from tokenlens.engine.config import PromptJob, SamplingConfig
from tokenlens.errors import TokenlensError
from tokenlens.rundir import read_run
from tokenlens.trace import TraceConfig, resume_trace, run_trace

PROMPTS: list[dict[str, object]] = [
    {"id": f"{lang}-{i}", "lang": lang, "pair": f"p{i}", "text": f"{word} {i}"}
    for i in range(3)
    for lang, word in (("ja", "日本の四季"), ("en", "four seasons"))
]


def config(tmp_path: Path, cache: Path, method: str = "draft_model", **kw: object) -> TraceConfig:
    base = TraceConfig(
        prompts=write_prompts(tmp_path / "p.jsonl", PROMPTS),
        out=tmp_path / "run",
        model="tiny-qwen3",
        draft_model="tiny-mimo-mtp" if method == "draft_model" else None,
        method=method,
        k=3,
        load_format="dummy",
        cache=cache,
        sampling=SamplingConfig(max_tokens=20, logprobs=2),
        concurrency=2,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["draft_model", "ngram"])
def test_a_trace_is_finished_and_reconciled(
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm, method: str
) -> None:
    progress = RecordingProgress()
    out = run_trace(config(tmp_path, tiny_cache, method), progress, start=fake_vllm)
    (engine,) = fake_vllm.started  # one engine, recording into the run's capture/
    assert engine.trace_dir == str(out / "capture")
    assert engine.speculative.method == method and engine.speculative.num_speculative_tokens == 3
    assert Path(engine.model).name == "tiny-qwen3" and engine.load_format == "dummy"
    run = read_run(out)
    assert run.manifest["status"] == "complete"
    assert run.manifest["reconciliation"] == {"exact": True, "differences": []}
    assert run.manifest["capture"]["state"] == "ok"
    assert run.metrics.num_drafts > 0 and len(run.metrics.accepted_per_position) == 3
    check_events(run)
    rows = {r["request_id"]: r for r in run.requests.to_pylist()}
    assert list(rows) == [p["id"] for p in PROMPTS]
    assert {r["finish_reason"] for r in rows.values()} <= {"stop", "length"}
    for row in rows.values():
        assert len(row["token_logprob"]) == len(row["output_token_ids"])
    # The stages the CLI's progress bars show, and one advance per finished request.
    names = [name for name, _ in progress.stages]
    assert names == ["check prompt lengths", "start the vLLM engine", "generate"]
    assert progress.stages[-1] == ("generate", len(PROMPTS)) and progress.advanced == len(PROMPTS)


def test_the_manifest_records_the_prompt_ids_the_engine_prefilled(
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm
) -> None:
    run = read_run(run_trace(config(tmp_path, tiny_cache), start=fake_vllm))
    for row in run.requests.to_pylist():
        assert row["prompt_token_count"] == len(row["prompt_token_ids"]) > 3
        assert tuple(row["prompt_token_ids"]) == toy_prompt_ids(job_of(row["request_id"]))


def job_of(prompt_id: str) -> PromptJob:
    text = next(str(p["text"]) for p in PROMPTS if p["id"] == prompt_id)
    return PromptJob(prompt_id, [{"role": "user", "content": text}], None, None)


def test_a_dead_engine_leaves_a_partial_run_that_resume_completes(
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm
) -> None:
    fake_vllm.die_after = {0: 2}  # the first engine dies once two requests finished
    cfg = config(tmp_path, tiny_cache)
    with pytest.raises(TokenlensError, match=r"died.*partial run written to .*trace --resume"):
        run_trace(cfg, start=fake_vllm)
    partial = read_run(cfg.out)
    assert partial.manifest["status"] == "partial"
    assert partial.manifest["salvage"]["finished"] == 2
    assert partial.manifest["salvage"]["unfinished"], "the kill should cut a request short"
    resume_trace(cfg.out, start=fake_vllm)
    assert len(fake_vllm.started) == 2
    assert fake_vllm.started[1].trace_dir == str(cfg.out / "capture" / "resume-1")
    run = read_run(cfg.out)
    assert run.manifest["status"] == "complete"
    (resumed,) = run.manifest["resumed"]
    assert (resumed["salvaged_requests"], resumed["generated_requests"]) == (2, len(PROMPTS) - 2)
    assert [r["request_id"] for r in run.requests.to_pylist()] == [p["id"] for p in PROMPTS]
    assert run.manifest["reconciliation"]["exact"] is True
    parts = json.loads((cfg.out / "metrics.json").read_text())["parts"]
    assert len(parts[0]["requests"]) == 2 and parts[1]["source"] == "vllm"
    check_events(run)
    # The same prompts traced by a healthy engine: the same outputs and events.
    whole = read_run(run_trace(replace(cfg, out=tmp_path / "whole"), start=FakeVllm()))
    assert run.requests.column("output_token_ids").equals(whole.requests.column("output_token_ids"))
    key = ["request_id", "step", "position"]
    assert run.events is not None and whole.events is not None
    assert run.events.sort_by([(k, "ascending") for k in key]).equals(
        whole.events.sort_by([(k, "ascending") for k in key])
    )


def test_an_engine_that_dies_again_keeps_the_run_partial_and_resumable(
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm
) -> None:
    fake_vllm.die_after = {0: 1, 1: 1}
    cfg = config(tmp_path, tiny_cache, concurrency=1)
    with pytest.raises(TokenlensError, match="partial run written to"):
        run_trace(cfg, start=fake_vllm)
    with pytest.raises(TokenlensError, match="the run stays partial at"):
        resume_trace(cfg.out, start=fake_vllm)
    again = read_run(cfg.out)
    assert again.manifest["status"] == "partial" and again.manifest["salvage"]["finished"] == 2
    resume_trace(cfg.out, start=fake_vllm)
    run = read_run(cfg.out)
    assert run.manifest["status"] == "complete"
    assert fake_vllm.started[2].trace_dir == str(cfg.out / "capture" / "resume-2")
    assert run.manifest["resumed"][-1]["salvaged_requests"] == 2
    check_events(run)


def test_an_engine_that_never_starts_leaves_a_resumable_run(
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm
) -> None:
    fake_vllm.fail_start = {0}
    cfg = config(tmp_path, tiny_cache)
    with pytest.raises(TokenlensError, match=r"failed to start.*partial run written to"):
        run_trace(cfg, start=fake_vllm)
    assert read_run(cfg.out).manifest["status"] == "partial"
    resume_trace(cfg.out, start=fake_vllm)
    run = read_run(cfg.out)
    assert run.manifest["resumed"][-1]["generated_requests"] == len(PROMPTS)
    check_events(run)


def test_counters_that_disagree_with_the_events_fail_the_trace(
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine whose counters are not its steps' (a drifted vLLM, another client)."""
    from tests.support import FakeEngine
    from tokenlens.engine.results import SpecCounters

    generate = FakeEngine.generate

    def one_draft_more(self: FakeEngine, *args: object, **kw: object) -> object:
        result = generate(self, *args, **kw)  # type: ignore[arg-type]
        return replace(result, counters=result.counters + SpecCounters(1, 3, 0, (0, 0, 0)))

    monkeypatch.setattr(FakeEngine, "generate", one_draft_more)
    cfg = config(tmp_path, tiny_cache)
    with pytest.raises(TokenlensError, match=r"events do not match vLLM's counters.*run kept at"):
        run_trace(cfg, start=fake_vllm)
    manifest = read_run(cfg.out).manifest
    assert manifest["reconciliation"]["exact"] is False


def test_a_failed_capture_fails_the_trace(
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests import support

    failed = {**support.FAKE_STATUS, "state": "failed", "problem": "the hook stopped"}
    monkeypatch.setattr(support, "FAKE_STATUS", failed)
    cfg = config(tmp_path, tiny_cache)
    with pytest.raises(TokenlensError, match=r"capture failed: .*the hook stopped.*run kept at"):
        run_trace(cfg, start=fake_vllm)


def test_a_too_long_prompt_starts_no_engine(
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm
) -> None:
    cfg = config(tmp_path, tiny_cache, max_model_len=30)
    with pytest.raises(TokenlensError, match="max_model_len 30"):
        run_trace(cfg, start=fake_vllm)
    assert fake_vllm.made == 0 and not cfg.out.exists()


def test_a_served_trace_waits_for_the_servers_last_step(tmp_path: Path) -> None:
    """A served engine is never closed, so its plugin's writer (waking every 50 ms) may
    still hold the last step when the last response arrives: the trace waits until the
    step files stop growing before it reads them."""
    import threading
    import time

    from tokenlens.capture.live import settle_capture

    steps = tmp_path / "steps-host-1.jsonl"
    steps.write_text("", encoding="utf-8")

    def late_writer() -> None:
        for i in range(6):
            time.sleep(0.05)
            with steps.open("a", encoding="utf-8") as fh:
                fh.write(f'{{"step": {i}}}\n')

    writer = threading.Thread(target=late_writer)
    writer.start()
    settle_capture(tmp_path, quiet=0.5, limit=10.0)
    lines = steps.read_text(encoding="utf-8").splitlines()
    writer.join()
    assert len(lines) == 6
