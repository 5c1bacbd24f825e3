"""Step files -> events: hand-built records with hand-computed expectations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenlens.capture.events import build_capture, run_request_id
from tokenlens.capture.reconcile import (
    counters_from_events,
    per_request_summary,
    reconcile,
    reconcile_per_request,
)
from tokenlens.capture.recorder import StepRecorder, write_status
from tokenlens.capture.summary import capture_problem, capture_summary, hook_cost
from tokenlens.engine.results import SpecCounters


def write_steps(directory: Path, steps: list[list[dict[str, object]]]) -> StepRecorder:
    rec = StepRecorder(directory)
    for records in steps:
        rec.write_step(records)
    rec.close()
    return rec


def submitted(directory: Path, pairs: dict[str, str]) -> None:
    with (directory / "submitted-1.jsonl").open("w") as fh:
        for internal, rid in pairs.items():
            fh.write(json.dumps({"internal": internal, "request_id": rid, "prompt_id": rid}) + "\n")


def test_events_follow_the_contract(tmp_path: Path) -> None:
    submitted(tmp_path, {"ja-1-0123abcd": "ja-1"})
    write_steps(
        tmp_path,
        [
            # prefill: one sampled token, no drafts
            [{"r": "ja-1-0123abcd", "b": 0, "g": [10], "n": 1}],
            # drafts 11,12,13: two accepted, target said 99 at position 2
            [
                {
                    "r": "ja-1-0123abcd",
                    "b": 1,
                    "g": [11, 12, 99],
                    "n": 3,
                    "d": [11, 12, 13],
                    "a": 2,
                    "i": 0,
                }
            ],
            # all three accepted + bonus 40
            [
                {
                    "r": "ja-1-0123abcd",
                    "b": 4,
                    "g": [20, 21, 22, 40],
                    "n": 4,
                    "d": [20, 21, 22],
                    "a": 3,
                    "i": 0,
                }
            ],
            # first draft rejected; stop hit after the correction token (n=1)
            [{"r": "ja-1-0123abcd", "b": 8, "g": [7], "n": 1, "d": [5, 6, 8], "a": 0, "i": 0}],
        ],
    )
    capture = build_capture(tmp_path)
    rows = capture.table().to_pylist()
    assert capture.outputs == {"ja-1": [10, 11, 12, 99, 20, 21, 22, 40, 7]}
    assert capture.gaps == []
    got = [
        (
            r["step"],
            r["position"],
            r["draft_token_id"],
            r["accepted"],
            r["emitted_token_id"],
            r["output_index"],
        )
        for r in rows
    ]
    assert got == [
        (0, 0, 11, True, 11, 1),
        (0, 1, 12, True, 12, 2),
        (0, 2, 13, False, 99, 3),
        (1, 0, 20, True, 20, 4),
        (1, 1, 21, True, 21, 5),
        (1, 2, 22, True, 22, 6),
        (2, 0, 5, False, 7, 8),
        (2, 1, 6, False, None, None),
        (2, 2, 8, False, None, None),
    ]
    assert {r["request_id"] for r in rows} == {"ja-1"}
    assert counters_from_events(capture.table()) == SpecCounters(3, 9, 5, (2, 2, 1))


def test_stop_inside_accepted_drafts_and_invalid_drafts(tmp_path: Path) -> None:
    write_steps(
        tmp_path,
        [
            [{"r": "x-deadbeef", "b": 0, "g": [1], "n": 1}],
            # four drafts, the last invalidated by a grammar: vLLM counts three
            [
                {
                    "r": "x-deadbeef",
                    "b": 1,
                    "g": [2, 3, 4],
                    "n": 3,
                    "d": [2, 3, 9, 9],
                    "a": 2,
                    "i": 1,
                }
            ],
            # all accepted but EOS at the first token: only one token kept (n=1)
            [{"r": "x-deadbeef", "b": 4, "g": [5, 6, 7], "n": 1, "d": [5, 6], "a": 2, "i": 0}],
        ],
    )
    capture = build_capture(tmp_path)
    rows = capture.table().to_pylist()
    assert len(rows) == 3 + 2
    assert [r["output_index"] for r in rows] == [1, 2, 3, 4, None]
    assert [r["emitted_token_id"] for r in rows] == [2, 3, 4, 5, 6]
    assert capture.outputs == {"x": [1, 2, 3, 4, 5]}


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    rec = write_steps(
        tmp_path, [[{"r": "a-00000000", "b": 0, "g": [1], "n": 1, "d": [1], "a": 1, "i": 0}]]
    )
    with rec.path.open("a") as fh:
        fh.write('{"seq": 1, "reqs": [{"r": "a-0000')  # killed mid-write
    assert build_capture(tmp_path).table().num_rows == 1


def test_request_id_mapping() -> None:
    ids = {"p-1a2b3c4d": "p"}
    assert run_request_id("p-1a2b3c4d", ids) == "p"
    assert run_request_id("2_p-1a2b3c4d", ids) == "p#2"  # parallel sampling child
    assert run_request_id("q-0badf00d", ids) == "q"  # unknown: strip vLLM's suffix
    assert run_request_id("plain", ids) == "plain"


def test_reconcile_reports_each_difference(tmp_path: Path) -> None:
    write_steps(
        tmp_path, [[{"r": "a-00000000", "b": 0, "g": [1, 2], "n": 2, "d": [1, 3], "a": 1, "i": 0}]]
    )
    events = build_capture(tmp_path).table()
    assert reconcile(events, SpecCounters(1, 2, 1, (1, 0))) == []
    problems = reconcile(events, SpecCounters(2, 2, 2, (1, 1)))
    assert problems == [
        "num_drafts: events 1 != vLLM 2",
        "num_accepted_tokens: events 1 != vLLM 2",
        "accepted_per_position: events [1, 0] != vLLM [1, 1]",
    ]


def test_hook_timing_and_placeholders_reach_the_summary(tmp_path: Path) -> None:
    rec = StepRecorder(tmp_path)
    step = {"r": "a-00000000", "b": 0, "g": [5, 9], "n": 2, "d": [5, -1, -1], "a": 1, "i": 0}
    rec.write_step([step], {"h": 0.002, "w": None})  # a process's first line: no interval
    rec.write_step([{**step, "b": 2}], {"h": 0.001, "w": 0.5})
    rec.write_step([{**step, "b": 4}], {"h": 0.003, "w": 0.5})
    rec.close()
    capture = build_capture(tmp_path)
    assert [t[:2] for t in capture.timing] == [(0.002, None), (0.001, 0.5), (0.003, 0.5)]
    assert all(wt is not None for _, _, wt in capture.timing)  # the writer thread timed itself
    cost = hook_cost(capture)
    assert cost["steps"] == 2 and cost["share"] == pytest.approx(0.004)
    summary = capture_summary(tmp_path, capture, capture.table())
    assert summary["state"] == "silent"  # no engine process wrote a status
    assert summary["placeholder_drafts"] == {
        "count": 6,
        "share": pytest.approx(6 / 9),
        "rejected": 6,
        "rejected_share": 1.0,
    }


def test_per_request_reconciliation_names_each_difference(tmp_path: Path) -> None:
    write_steps(
        tmp_path,
        [
            [{"r": "a-00000000", "b": 0, "g": [1, 2], "n": 2, "d": [1, 3], "a": 1, "i": 0}],
            [{"r": "a-00000000", "b": 2, "g": [4], "n": 1, "d": [5, 6], "a": 0, "i": 0}],
        ],
    )
    events = build_capture(tmp_path).table()
    detailed = {"a": {"per_step_accepted": [1, 0], "per_step_drafted": [2, 2]}}
    assert reconcile_per_request(events, detailed) == []
    wrong = {"a": {"per_step_accepted": [0, 1], "per_step_drafted": [2, 2]}}
    assert reconcile_per_request(events, wrong) == [
        "a: events accepted/drafted per step [1, 0]/[2, 2] != vLLM [0, 1]/[2, 2]"
    ]
    summary = {"a": {"num_spec_steps": 2, "num_accepted_draft_tokens": 1, "num_draft_tokens": 4}}
    assert reconcile_per_request(events, summary) == []
    missing = {"b": {"num_spec_steps": 1, "num_accepted_draft_tokens": 0, "num_draft_tokens": 2}}
    assert reconcile_per_request(events, missing) == [
        "b: events steps/accepted/drafted (0, 0, 0) != vLLM (1, 0, 2)"
    ]
    assert per_request_summary(events, detailed)["level"] == "detailed"
    assert per_request_summary(events, {})["available"] is False


def test_a_failed_engine_process_fails_the_capture(tmp_path: Path) -> None:
    write_status(tmp_path, {"state": "failed", "pid": 7, "problem": "never reached", "tier": "x"})
    capture = build_capture(tmp_path)
    summary = capture_summary(tmp_path, capture, capture.table())
    assert summary["state"] == "failed" and summary["problems"] == ["pid 7: never reached"]
    assert capture_problem(summary, drafts_counted=0) == "capture failed: pid 7: never reached"


def test_counted_drafts_without_any_hooked_step_fail_the_capture(tmp_path: Path) -> None:
    capture = build_capture(tmp_path)
    summary = capture_summary(tmp_path, capture, capture.table())
    assert capture_problem(summary, drafts_counted=0) is None  # nothing to see: fine
    problem = capture_problem(summary, drafts_counted=12)
    assert problem is not None and "never saw a scheduler step" in problem


@pytest.mark.parametrize("form", ["list of lists", "2-d array", "list of arrays"])
def test_hook_reads_numpy_and_list_outputs_alike(tmp_path: Path, form: str) -> None:
    """vLLM has passed sampled tokens as lists and as numpy arrays: each must record."""
    from types import SimpleNamespace

    import numpy as np

    from tokenlens.capture.plugin import _Hook

    sampled = {
        "list of lists": [[5, 6, 9]],
        "2-d array": np.array([[5, 6, 9]]),
        "list of arrays": [np.array([5, 6, 9])],
    }[form]
    hook = _Hook(StepRecorder(tmp_path, background=False), {})
    hook.seen_scheduler = True  # no status file for this stand-in scheduler
    request = SimpleNamespace(output_token_ids=[1, 2])
    sched = SimpleNamespace(requests={"a-00000000": request})
    out = SimpleNamespace(scheduled_spec_decode_tokens={"a-00000000": np.array([5, 6, 7])})
    runner = SimpleNamespace(sampled_token_ids=sampled, req_id_to_index={"a-00000000": 0})
    hook._begin(sched, out, runner)
    hook._spec(
        {"request_id": "a-00000000", "num_accepted_tokens": 2, "num_invalid_spec_tokens": None}
    )
    request.output_token_ids = [1, 2, 5, 6, 9]
    hook._end(sched)
    rows = build_capture(tmp_path).table().to_pylist()
    assert [(r["step"], r["draft_token_id"], r["accepted"], r["emitted_token_id"],
             r["output_index"]) for r in rows] == [
        (0, 5, True, 5, 2),
        (0, 6, True, 6, 3),
        (0, 7, False, 9, 4),
    ]  # fmt: skip
