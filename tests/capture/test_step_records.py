"""Step lines as flat columns read back as the records older step files hold (no vLLM)."""

from __future__ import annotations

import gc
import json

import pytest

from tokenlens.capture.step_records import StepSnapshot, line_records


def snapshot() -> StepSnapshot:
    step = StepSnapshot(ids=["a", "b", "c", "gone", "prefill"], before=[3, 0, 7, -1, 0])
    rows = [[5, 6, 9], [4], [8, 2], [1], []]
    step.sample(rows)
    del rows[2][1:]  # vLLM trims its own list after a stop: the copy keeps it all
    step.count("a", [5, 6, 7], 2, 0)
    step.count("c", [8, 3, 3], 1, 1)
    step.count("late", [1, 2], 0, 0)
    step.kept = [3, 1, 1, 0, 0]  # c: a stop kept one of two
    return step


def test_columns_read_back_as_the_older_records() -> None:
    line = json.loads(json.dumps({"seq": 0, "t": 0.0, "cols": snapshot().columns()}))
    assert line_records(line) == [
        {"r": "a", "b": 3, "g": [5, 6, 9], "n": 3, "d": [5, 6, 7], "a": 2, "i": 0},
        {"r": "b", "b": 0, "g": [4], "n": 1},
        {"r": "c", "b": 7, "g": [8, 2], "n": 1, "d": [8, 3, 3], "a": 1, "i": 1},
        {"r": "late", "b": None, "g": [], "n": 0, "d": [1, 2], "a": 0, "i": 0},
    ]


def test_the_older_form_is_read_as_it_is() -> None:
    records = [{"r": "a", "b": 0, "g": [4], "n": 1}]
    assert line_records({"seq": 0, "t": 0.0, "reqs": records}) is records


def test_counts_that_do_not_add_up_are_refused() -> None:
    cols = snapshot().columns()
    cols["c"] = [3, 1, 2, 1, 1]
    with pytest.raises(ValueError, match="counts add up"):
        line_records({"cols": cols})


def test_a_step_makes_no_container_per_request() -> None:
    """The collector's cost grew with every list made per request (module docstring)."""
    rows = [[i, i + 1, i + 2] for i in range(256)]
    drafts = [[i, i, i] for i in range(256)]

    def step() -> StepSnapshot:
        s = StepSnapshot(ids=[str(i) for i in range(256)], before=list(range(256)))
        s.sample(rows)
        for i in range(256):
            s.count(str(i), drafts[i], 2, 0)
        s.kept = [3] * 256
        return s

    step()  # warm
    gc.collect()
    gc.disable()
    try:
        tracked = len(gc.get_objects())
        kept = step()
        made = len(gc.get_objects()) - tracked
    finally:
        gc.enable()
    assert kept.counts == [3] * 256 and len(kept.spec_drafts) == 768
    assert made < 40, f"{made} tracked objects for one step of 256 requests"
