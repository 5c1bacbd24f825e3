"""Draft ids from the Model Runner V2 side, joined to the real scheduler's verdicts.

Model Runner V2 cannot run on the CPU build, so the runner is vLLM's real
``GPUModelRunner`` class (installed 0.32) with the hook wrapped around a stand-in
``prepare_inputs`` that returns a real ``InputBatch`` and keeps V2's request state (a
``draft_tokens`` row per request, ``prompt_len``, ``total_len``) in torch tensors. The
scheduler is vLLM's real ``Scheduler`` / ``AsyncScheduler`` (tokenlens/testing/scheduler.py)
and sees what V2 gives it: ``[-1] * k``, with async scheduling on and off.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.capture.fake_v2 import V2, K, drive
from tokenlens.capture import runner_drafts
from tokenlens.capture.reconcile import reconcile, reconcile_per_request
from tokenlens.capture.summary import draft_id_summary

pytest.importorskip("vllm", reason="the vLLM CPU build is part of the test environment")
torch = pytest.importorskip("torch")


@pytest.mark.parametrize("async_", [False, True], ids=["async-off", "async-on"])
def test_v2_draft_ids_join_the_scheduler_verdicts(
    harness: Callable[..., Any], async_: bool
) -> None:
    h = harness(async_=async_)
    v2 = V2(h.trace_dir)
    reqs = {}
    for i in range(3):
        rid = f"r{i}-0123abcd"
        prompt = [200 + i] * (20 + i)
        reqs[f"r{i}"] = h.add(rid, prompt=prompt, max_tokens=14 + i)
        v2.add(rid, prompt)
    drive(h, v2, lambda rid, step: (step + int(rid[1])) % (K + 1), async_)

    capture = h.capture()
    events = capture.table()
    assert reconcile(events, h.stats) == []
    assert (
        reconcile_per_request(
            events, {rid: r.spec_decode_metrics.to_dict() for rid, r in reqs.items()}
        )
        == []
    )
    assert capture.draft_ids["placeholders"] == events.num_rows > 0
    assert capture.draft_ids["recovered"] == events.num_rows
    # Every row's id is the one the runner verified at that step and position.
    truth = {(rid.split("-")[0], b): d for rid, b, d in v2.proposed}
    by_step: dict[tuple[str, int], list[int]] = {}
    for e in events.to_pylist():
        by_step.setdefault((e["request_id"], e["step"]), []).append(e["draft_token_id"])
    firsts = {
        (e["request_id"], e["step"]): e["output_index"]
        for e in events.to_pylist()
        if e["position"] == 0
    }
    for key, drafts in by_step.items():
        assert drafts == truth[(key[0], firsts[key])]
    summary = draft_id_summary(h.trace_dir, capture, events)
    assert summary["source"] == "model_runner" and summary["runner"] == "v2"
    assert summary["complete"] and summary["unknown"] == 0 and summary["unknown_share"] == 0


def test_a_runner_record_that_contradicts_the_verdicts_is_not_used(
    harness: Callable[..., Any],
) -> None:
    h = harness(async_=True)
    v2 = V2(h.trace_dir)
    h.add("a-0123abcd", prompt=[7] * 20, max_tokens=10)
    v2.add("a-0123abcd", [7] * 20)
    drive(h, v2, lambda rid, step: 2, async_=True)  # two accepted drafts per step
    files = list(h.trace_dir.glob("drafts-*.jsonl"))
    lines = [json.loads(x) for x in files[0].read_text().splitlines()]
    lines[0]["reqs"][0]["d"][0] += 1  # the first step's accepted draft, corrupted
    files[0].write_text("".join(json.dumps(x) + "\n" for x in lines))

    capture = h.capture()
    events = capture.table().to_pylist()
    first = [e["draft_token_id"] for e in events if e["step"] == 0]
    assert first == [-1] * K
    assert all(e["draft_token_id"] >= 0 for e in events if e["step"] > 0)
    assert capture.draft_ids["disagreements"] == 1
    summary = draft_id_summary(h.trace_dir, capture, capture.table())
    assert not summary["complete"] and summary["unknown"] == K and summary["unknown_steps"] == 1
    assert "contradicts" in summary["problem"]


def test_without_runner_records_the_manifest_says_ids_are_unknown(
    harness: Callable[..., Any],
) -> None:
    h = harness(async_=True)
    h.add("a-0123abcd", max_tokens=8)
    h.run(accept=lambda rid, step: 1, drafts=False)
    capture = h.capture()
    summary = draft_id_summary(h.trace_dir, capture, capture.table())
    assert summary["source"] == "scheduler" and not summary["complete"]
    assert summary["unknown"] == capture.table().num_rows and summary["recovered"] == 0
    assert "no model-runner record" in summary["problem"]


# -- the surface the hook relies on ------------------------------------------------


def test_the_installed_v2_runner_has_the_surface() -> None:
    from vllm.v1.worker.gpu import input_batch, model_runner, states

    assert (
        runner_drafts.surface_problems(
            model_runner.GPUModelRunner, input_batch.InputBatch, states.RequestState, input_batch
        )
        == []
    )


def test_patching_the_installed_runner_wraps_and_unpatch_restores(tmp_path: Path) -> None:
    from vllm.v1.worker.gpu import model_runner

    original = model_runner.GPUModelRunner.__dict__["prepare_inputs"]
    try:
        assert runner_drafts.patch_module(model_runner, tmp_path) is None
        wrapped = model_runner.GPUModelRunner.__dict__["prepare_inputs"]
        assert wrapped is not original and wrapped.__wrapped__ is original
        assert runner_drafts.patch_module(model_runner, tmp_path) is None  # idempotent
        assert model_runner.GPUModelRunner.__dict__["prepare_inputs"] is wrapped
    finally:
        runner_drafts.unpatch()
    assert model_runner.GPUModelRunner.__dict__["prepare_inputs"] is original


def test_a_changed_surface_is_refused_loudly_and_nothing_is_patched(tmp_path: Path) -> None:
    from vllm.v1.worker.gpu import model_runner

    class GPUModelRunner(model_runner.GPUModelRunner):  # type: ignore[misc]
        def prepare_inputs(self, scheduler_output: Any, batch_desc: Any) -> Any:
            return self.build(scheduler_output, self.req_states.draft_tokens)

    fake = ModuleType("fake_runner")
    fake.GPUModelRunner = GPUModelRunner  # type: ignore[attr-defined]
    problem = runner_drafts.patch_module(fake, tmp_path)
    assert problem is not None and "combine_sampled_and_draft_tokens" in problem
    assert "__tokenlens_original__" not in dir(GPUModelRunner.__dict__["prepare_inputs"])
    status = json.loads(next(tmp_path.glob("runner-*.json")).read_text())
    assert status["state"] == "refused" and "combine_sampled_and_draft_tokens" in status["problem"]


def test_prepare_inputs_check_reads_the_call() -> None:
    def uses(self: Any) -> None:
        combine_sampled_and_draft_tokens(self.a, self.req_states.draft_tokens)  # type: ignore[name-defined]  # noqa: F821

    def other(self: Any) -> None:
        combine_sampled_and_draft_tokens(self.a, self.req_states.other)  # type: ignore[name-defined]  # noqa: F821

    assert runner_drafts.prepare_inputs_problem(uses) is None
    assert runner_drafts.prepare_inputs_problem(other) is not None


def test_the_runner_module_is_patched_when_first_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tl_late_module.py").write_text(textwrap.dedent("VALUE = 1\n"))
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[ModuleType] = []
    finder = runner_drafts._AfterImport("tl_late_module", seen.append)
    sys.meta_path.insert(0, finder)
    try:
        import tl_late_module  # type: ignore[import-not-found]

        assert seen == [tl_late_module] and tl_late_module.VALUE == 1
        assert finder not in sys.meta_path  # once
    finally:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
        sys.modules.pop("tl_late_module", None)
