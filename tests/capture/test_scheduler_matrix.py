"""The hook on vLLM's real scheduler, step by step, without a model (seconds per test).

Each case drives ``Scheduler`` (or ``AsyncScheduler``) with hand-made model outputs
and checks that the recorded events equal what vLLM itself counted: the
``SpecDecodingStats`` returned by ``update_from_output`` (summed over the steps), and
each request's own ``RequestSpecDecodeMetrics`` (``detailed``: accepted/proposed per
step). These pin down the vLLM behaviour the plugin relies on.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tokenlens.capture.events import EVENTS_WRITE_SCHEMA
from tokenlens.capture.reconcile import reconcile, reconcile_per_request

pytestmark = pytest.mark.vllm  # vLLM's real Scheduler (imported, no engine)
pytest.importorskip("vllm", reason="the vLLM CPU build is part of the test environment")

K = 3  # the harness's num_speculative_tokens (tokenlens/testing/scheduler.py)
A = "a-0123abcd"  # engine ids carry an 8-hex suffix; events use the id without it


def rows(h: Any) -> list[tuple[Any, ...]]:
    events = h.capture().table()
    return [
        (r["request_id"], r["step"], r["position"], r["draft_token_id"], r["accepted"],
         r["emitted_token_id"], r["output_index"])
        for r in events.to_pylist()
    ]  # fmt: skip


def check_vllm_agrees(
    h: Any, requests: dict[str, Any], id_map: dict[str, str] | None = None
) -> None:
    """Events == vLLM's SpecDecodingStats, and == each request's per-step metrics.

    Also per position: the rows at each draft position == vLLM's own
    ``num_draft_tokens_per_pos`` (not an exported counter; it differs from k times the
    steps when k varies from step to step).
    """
    capture = h.capture(id_map)
    events = capture.table()
    assert events.schema == EVENTS_WRITE_SCHEMA
    assert h.stats.num_drafts > 0
    assert reconcile(events, h.stats, len(capture.empty_steps)) == []
    per_request = {rid: r.spec_decode_metrics.to_dict() for rid, r in requests.items()}
    assert reconcile_per_request(events, per_request, capture.empty_steps) == []
    positions = events.column("position").to_pylist()
    drafted = [positions.count(p) for p in range(len(h.drafted_per_position))]
    assert drafted == h.drafted_per_position


def prefill(h: Any, req: str, first: int, drafts: list[int]) -> None:
    out = h.step({req: [first]}, {req: drafts})
    assert out.num_scheduled_tokens[req] == 20


def test_partial_acceptance(harness: Callable[..., Any]) -> None:
    h = harness()
    req = h.add(A)
    prefill(h, A, 5, [6, 7, 8])
    out = h.step({A: [6, 7, 9]})
    assert out.scheduled_spec_decode_tokens[A] == [6, 7, 8]
    assert rows(h) == [
        ("a", 0, 0, 6, True, 6, 1),
        ("a", 0, 1, 7, True, 7, 2),
        ("a", 0, 2, 8, False, 9, 3),
    ]
    check_vllm_agrees(h, {"a": req})


def test_all_accepted_plus_bonus(harness: Callable[..., Any]) -> None:
    h = harness()
    req = h.add(A)
    prefill(h, A, 5, [6, 7, 8])
    h.step({A: [6, 7, 8, 4]})
    assert [r[4:] for r in rows(h)] == [(True, 6, 1), (True, 7, 2), (True, 8, 3)]
    assert h.capture().outputs == {"a": [5, 6, 7, 8, 4]}  # the bonus token lands at 4
    assert h.stats.accepted_per_position == (1, 1, 1)
    check_vllm_agrees(h, {"a": req})


def test_stop_token_in_the_middle_of_a_step(harness: Callable[..., Any]) -> None:
    h = harness()
    req = h.add(A, stop=[7])
    prefill(h, A, 5, [6, 7, 8])
    h.step({A: [6, 7, 8, 4]})
    assert req.is_finished() and list(req.output_token_ids) == [5, 6, 7]
    # vLLM counts all three drafts accepted; the third never reached the output.
    assert [r[4:] for r in rows(h)] == [(True, 6, 1), (True, 7, 2), (True, 8, None)]
    check_vllm_agrees(h, {"a": req})


def test_max_tokens_reached_mid_step(harness: Callable[..., Any]) -> None:
    h = harness()
    req = h.add(A, max_tokens=3)
    prefill(h, A, 5, [6, 7, 8])
    h.step({A: [6, 9]})
    assert req.is_finished() and list(req.output_token_ids) == [5, 6, 9]
    assert [r[4:] for r in rows(h)] == [(True, 6, 1), (False, 9, 2), (False, None, None)]
    check_vllm_agrees(h, {"a": req})


def test_max_tokens_cuts_accepted_drafts(harness: Callable[..., Any]) -> None:
    h = harness()
    req = h.add(A, max_tokens=3)
    prefill(h, A, 5, [6, 7, 8])
    h.step({A: [6, 7, 8, 4]})
    assert list(req.output_token_ids) == [5, 6, 7]
    assert [r[4:] for r in rows(h)] == [(True, 6, 1), (True, 7, 2), (True, 8, None)]
    check_vllm_agrees(h, {"a": req})


def test_invalid_spec_tokens_of_structured_output(harness: Callable[..., Any]) -> None:
    """Async scheduling with a grammar: drafts the grammar rejects are not counted.

    The drafts arrive after scheduling (what EngineCore does for a deferred
    structured-output step); a grammar that forbids the third draft leaves two of them
    (vLLM 0.32 trims them in ``validate_tokens``, 0.34 in the worker), and vLLM pads
    the rest with -1 and counts it as invalid.
    """
    from vllm.v1.outputs import DraftTokenIds

    h = harness(async_=True)
    req = h.add(A)
    h.finish(h.schedule(), {A: [5]})
    out = h.schedule()
    assert out.scheduled_spec_decode_tokens[A] == [-1] * K  # placeholders until drafted
    h.sched.update_draft_token_ids_in_output(DraftTokenIds([A], [[6, 7]]), out)
    assert out.scheduled_spec_decode_tokens[A] == [6, 7, -1]
    assert out.num_invalid_spec_tokens == {A: 1}
    h.finish(out, {A: [6, 9]})
    assert rows(h) == [("a", 0, 0, 6, True, 6, 1), ("a", 0, 1, 7, False, 9, 2)]
    assert h.stats.num_draft_tokens == 2
    check_vllm_agrees(h, {"a": req})


def test_padded_placeholder_drafts_without_async_scheduling(
    harness: Callable[..., Any],
) -> None:
    """A waiting request with one token left to compute is padded with [-1]*k drafts."""
    h = harness()
    prompt = list(range(100, 117))  # 17 tokens: one full block is cached for the second
    first = h.add(A, prompt=prompt)
    h.step({A: [5]}, {A: [6, 7, 8]})
    second = h.add("b-0123abcd", prompt=prompt)
    out = h.step({A: [6, 9], "b-0123abcd": [5]})
    assert out.scheduled_spec_decode_tokens["b-0123abcd"] == [-1] * K
    padded = [r for r in rows(h) if r[0] == "b"]
    assert padded == [
        ("b", 0, 0, -1, False, 5, 0),
        ("b", 0, 1, -1, False, None, None),
        ("b", 0, 2, -1, False, None, None),
    ]
    check_vllm_agrees(h, {"a": first, "b": second})


def test_preemption_and_resumption(harness: Callable[..., Any]) -> None:
    h = harness(num_blocks=9)  # 8 usable blocks of 16 for 3 requests growing to 60 tokens
    reqs = {
        f"r{i}": h.add(f"r{i}-0123abcd", prompt=[200 + i] * 20, max_tokens=40) for i in range(3)
    }
    h.run(accept=lambda rid, step: step % (K + 1))
    assert h.preempted, "the KV cache was not small enough to preempt"
    assert all(r.is_finished() for r in reqs.values())
    outputs = h.capture().outputs
    for rid, req in reqs.items():
        assert outputs[rid] == list(req.output_token_ids)  # rebuilt across the preemption
    check_vllm_agrees(h, reqs)


def test_parallel_sampling_children(harness: Callable[..., Any]) -> None:
    """n > 1: vLLM schedules one child request per sample (``<i>_<parent id>``)."""
    h = harness()
    children = {f"p#{i}": h.add(f"{i}_p-0123abcd", max_tokens=12) for i in range(2)}
    h.run(accept=lambda rid, step: (step + int(rid[0])) % (K + 1))
    capture = h.capture({"p-0123abcd": "p"})
    assert set(capture.outputs) == {"p#0", "p#1"}
    check_vllm_agrees(h, children, {"p-0123abcd": "p"})


def test_async_scheduling_records_placeholders(harness: Callable[..., Any]) -> None:
    h = harness(async_=True)
    req = h.add(A, max_tokens=16)
    h.run(accept=lambda rid, step: step % (K + 1), drafts=False)
    events = h.capture().table().to_pylist()
    assert events and all(e["draft_token_id"] == -1 for e in events)
    for e in events:  # the accept/reject pattern and the emitted tokens stay exact
        if e["accepted"]:
            assert e["emitted_token_id"] == 500 + e["position"]
    status = json.loads(next(h.trace_dir.glob("capture-*.json")).read_text())
    assert status["async_scheduling"] is True and status["state"] == "recording"
    check_vllm_agrees(h, {"a": req})


def test_subclass_calling_super_is_hooked(vllm_config: Any, harness: Callable[..., Any]) -> None:
    """A scheduler subclass defined after the plugin loaded gets the hook on its override."""
    from vllm.v1.core.sched.scheduler import Scheduler

    h = harness()

    class LoggingScheduler(Scheduler):
        calls = 0

        def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
            LoggingScheduler.calls += 1
            return super().update_from_output(scheduler_output, model_runner_output)

    assert hasattr(LoggingScheduler.__dict__["update_from_output"], "__tokenlens_original__")
    h.sched.__class__ = LoggingScheduler
    req = h.add(A)
    prefill(h, A, 5, [6, 7, 8])
    h.step({A: [6, 7, 9]})
    assert LoggingScheduler.calls == 2
    assert len(rows(h)) == 3  # recorded once, not twice
    check_vllm_agrees(h, {"a": req})


def test_scheduler_that_stops_counting_fails_the_capture(harness: Callable[..., Any]) -> None:
    """Several tokens per step but make_spec_decoding_stats never reached: capture failed."""
    h = harness()
    h.sched.make_spec_decoding_stats = lambda stats, *args, **kwargs: stats  # inlined away
    h.add(A)
    prefill(h, A, 5, [6, 7, 8])
    h.step({A: [6, 7, 9]})
    status = json.loads(next(h.trace_dir.glob("capture-*.json")).read_text())
    assert status["state"] == "failed"
    assert "make_spec_decoding_stats was never reached" in status["problem"]


def test_paused_hook_passes_steps_through(harness: Callable[..., Any]) -> None:
    from tokenlens.capture import plugin

    h = harness()
    h.trace_dir.mkdir(parents=True)
    (h.trace_dir / plugin.PAUSE_FILE).touch()
    h.add(A)
    prefill(h, A, 5, [6, 7, 8])
    h.step({A: [6, 7, 9]})
    assert rows(h) == [] and h.stats.num_drafts == 1  # vLLM counted, the hook did not
    (h.trace_dir / plugin.PAUSE_FILE).unlink()
    assert plugin._active is not None
    plugin._active.next_pause_check = 0.0  # instead of waiting PAUSE_CHECK_SECONDS
    h.propose({A: [1, 2, 3]})
    h.step({A: [1, 4]})
    assert [r[1:5] for r in rows(h)] == [(0, 0, 1, True), (0, 1, 2, False), (0, 2, 3, False)]


def test_all_drafts_invalid_is_a_step_without_rows(harness: Callable[..., Any]) -> None:
    """A grammar that forbids every draft: vLLM counts a draft with no draft token.

    No event row can stand for it, so the capture lists the step and the counters
    derived from the events count it (``num_drafts`` + 1, no draft token), as vLLM's
    own counters and the request's per-step metrics (0 of 0) do.
    """
    from vllm.v1.outputs import DraftTokenIds

    h = harness(async_=True)
    req = h.add(A)
    h.finish(h.schedule(), {A: [5]})
    out = h.schedule()
    h.sched.update_draft_token_ids_in_output(DraftTokenIds([A], [[]]), out)
    assert out.scheduled_spec_decode_tokens[A] == [-1] * K
    assert out.num_invalid_spec_tokens == {A: K}
    h.finish(out, {A: [9]})
    out = h.schedule()
    h.sched.update_draft_token_ids_in_output(DraftTokenIds([A], [[1, 2, 3]]), out)
    h.finish(out, {A: [1, 4]})
    assert h.stats.num_drafts == 2 and h.stats.num_draft_tokens == K
    assert rows(h) == [
        ("a", 1, 0, 1, True, 1, 2),
        ("a", 1, 1, 2, False, 4, 3),
        ("a", 1, 2, 3, False, None, None),
    ]
    assert h.capture().empty_steps == [("a", 0)]
    assert req.spec_decode_metrics.to_dict()["per_step_drafted"] == [0, K]
    check_vllm_agrees(h, {"a": req})


def test_request_index_follows_the_workers_batch_order(harness: Callable[..., Any]) -> None:
    """The worker's rows need not follow the schedule: each request's tokens are its own.

    vLLM 0.34 finds a request's row by its position in ``req_ids`` (``req_id_to_index``
    is gone); earlier releases by ``req_id_to_index``. The harness builds whichever
    the installed ``ModelRunnerOutput`` has, in the reverse of the scheduled order.
    """
    h = harness()
    h.reverse_batch = True
    b = "b-0123abcd"
    reqs = {"a": h.add(A), "b": h.add(b, prompt=list(range(300, 320)))}
    h.step({A: [5], b: [50]}, {A: [6, 7, 8], b: [60, 70, 80]})
    h.step({A: [6, 9], b: [60, 70, 80, 90]})
    assert sorted(r for r in rows(h) if r[4]) == [
        ("a", 0, 0, 6, True, 6, 1),
        ("b", 0, 0, 60, True, 60, 1),
        ("b", 0, 1, 70, True, 70, 2),
        ("b", 0, 2, 80, True, 80, 3),
    ]
    assert h.capture().outputs == {"a": [5, 6, 9], "b": [50, 60, 70, 80, 90]}
    check_vllm_agrees(h, reqs)


def test_a_step_with_a_different_k(harness: Callable[..., Any]) -> None:
    """k varies per step (vLLM's dynamic speculative decoding): each row says its step's k."""
    h = harness()
    req = h.add(A)
    prefill(h, A, 5, [6, 7])  # the drafter proposed 2 this time
    out = h.step({A: [6, 7, 1]}, {A: [1, 2, 3]})
    assert out.scheduled_spec_decode_tokens[A] == [6, 7]
    h.step({A: [1, 9]})
    events = h.capture().table().to_pylist()
    assert [(e["step"], e["position"], e["k"]) for e in events] == [
        (0, 0, 2),
        (0, 1, 2),
        (1, 0, 3),
        (1, 1, 3),
        (1, 2, 3),
    ]
    assert h.drafted_per_position == [2, 2, 1]
    check_vllm_agrees(h, {"a": req})


def test_dynamic_k_chosen_by_batch_size_under_async_scheduling(
    harness: Callable[..., Any],
) -> None:
    """vLLM's own dynamic k (``dynamic_sd_lookup``: k by batch size) with placeholders."""
    h = harness(async_=True)
    h.sched.dynamic_sd_lookup = [K, 1, 2, 3, 3, 3]  # batch size -> k
    reqs = {"a": h.add(A, max_tokens=10)}
    h.run(accept=lambda rid, step: 1, drafts=False, steps=3)
    reqs["b"] = h.add("b-0123abcd", max_tokens=10)
    h.run(accept=lambda rid, step: 1, drafts=False)
    ks = {e["k"] for e in h.capture().table().to_pylist()}
    assert ks == {1, 2}, ks
    check_vllm_agrees(h, reqs)


def test_stale_output_after_preemption_is_counted_as_vllm_counts_it(
    harness: Callable[..., Any],
) -> None:
    """A preemption catches a step in flight (async scheduling): its output arrives stale.

    vLLM delivers it (appends the tokens, counts the drafts) but leaves the request's
    reset counters alone; the events follow vLLM step by step, and every request's
    output rebuilt from the steps equals vLLM's.
    """
    h = harness(async_=True, num_blocks=9)
    reqs = {
        f"r{i}": h.add(f"r{i}-0123abcd", prompt=[200 + i] * 20, max_tokens=40) for i in range(3)
    }
    h.run(accept=lambda rid, step: step % (K + 1), drafts=False, overlap=True, max_steps=400)
    assert h.preempted, "the KV cache was not small enough to preempt"
    assert h.stale, "no output arrived stale"
    outputs = h.capture().outputs
    for rid, req in reqs.items():
        assert outputs[rid] == list(req.output_token_ids)
    check_vllm_agrees(h, reqs)


def test_stale_output_vllm_drops_is_dropped(harness: Callable[..., Any]) -> None:
    """``reset_prefix_cache`` preempts with ``drop_stale_output``: the step in flight is
    discarded by vLLM (no tokens, not counted), and by the capture with it."""
    h = harness(async_=True)
    req = h.add(A, max_tokens=12)
    h.finish(h.schedule(), {A: [5]})
    in_flight = h.schedule()
    assert in_flight.scheduled_spec_decode_tokens[A] == [-1] * K
    assert h.sched.reset_prefix_cache(reset_running_requests=True)
    assert req.drop_stale_output and req.num_stale_output_tokens > 0
    h.finish(in_flight, {A: [501, 502, 7]})  # the output of the step vLLM dropped
    assert list(req.output_token_ids) == [5] and h.stats.num_drafts == 0
    assert rows(h) == [] and h.capture().outputs == {"a": [5]}
    h.run(accept=lambda rid, step: 1, drafts=False)
    assert h.capture().outputs["a"] == list(req.output_token_ids)
    check_vllm_agrees(h, {"a": req})


def test_steps_without_a_sampled_token(harness: Callable[..., Any]) -> None:
    """``num_sampled_tokens_per_step`` 0 (pooling, diffusion): no correction token after
    the accepted drafts, so the first rejected position emits nothing; the status says so."""
    h = harness()
    h.sched.num_sampled_tokens_per_step = 0
    req = h.add(A)
    prefill(h, A, 5, [6, 7, 8])
    h.step({A: [6, 7]})
    assert rows(h) == [
        ("a", 0, 0, 6, True, 6, 1),
        ("a", 0, 1, 7, True, 7, 2),
        ("a", 0, 2, 8, False, None, None),
    ]
    status = json.loads(next(h.trace_dir.glob("capture-*.json")).read_text())
    assert status["num_sampled_tokens_per_step"] == 0
    check_vllm_agrees(h, {"a": req})


def test_status_names_the_engine_from_its_resolved_config(harness: Callable[..., Any]) -> None:
    """The scheduler process records the config's facts (what `trace --server` keeps)."""
    h = harness()
    h.add(A)
    prefill(h, A, 5, [6, 7, 8])
    status = json.loads(next(h.trace_dir.glob("capture-*.json")).read_text())
    engine = status["engine"]
    assert engine["speculative_method"] == "ngram" and engine["num_speculative_tokens"] == K
    assert engine["dtype"] == "float32" and engine["quantization"] is None
    # the config's, as vLLM resolved it (0.32's CPU platform: off; 0.34 turns it on for
    # n-gram, which its V2 runner drafts on the device)
    assert engine["async_scheduling"] is h.sched.scheduler_config.async_scheduling
    assert engine["model_runner"] in ("V1", "V2") and engine["model_runner_source"]
    assert engine["device"]["type"] == "cpu" and engine["parallel"]["tensor"] == 1
