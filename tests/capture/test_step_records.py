"""Step lines as columns read back as the records older step files hold (no vLLM)."""

from __future__ import annotations

import json

from tokenlens.capture.step_records import StepSnapshot, copy_ids, copy_rows, line_records


def test_columns_read_back_as_the_older_records() -> None:
    step = StepSnapshot(
        ids=["a", "b", "c", "gone", "prefill"],
        before=[3, 0, 7, -1, 0],
        sampled=[[5, 6, 9], [4], [8, 2], [1], []],
        kept=[3, 1, 1, 0, 0],  # c: a stop kept one of two
        spec={"a": [[5, 6, 7], 2, 0], "c": [[8, 3, 3], 1, 1], "late": [[1, 2], 0, 0]},
    )
    line = json.loads(json.dumps({"seq": 0, "t": 0.0, "cols": step.columns()}))
    assert line_records(line) == [
        {"r": "a", "b": 3, "g": [5, 6, 9], "n": 3, "d": [5, 6, 7], "a": 2, "i": 0},
        {"r": "b", "b": 0, "g": [4], "n": 1},
        {"r": "c", "b": 7, "g": [8, 2], "n": 1, "d": [8, 3, 3], "a": 1, "i": 1},
        {"r": "late", "b": None, "g": [], "n": 0, "d": [1, 2], "a": 0, "i": 0},
    ]


def test_the_older_form_is_read_as_it_is() -> None:
    records = [{"r": "a", "b": 0, "g": [4], "n": 1}]
    assert line_records({"seq": 0, "t": 0.0, "reqs": records}) is records


def test_copies_do_not_follow_vllms_later_edits() -> None:
    """vLLM trims a request's sampled list in place after a stop: the copy keeps it all."""
    rows = [[1, 2, 3], [4]]
    copied = copy_rows(rows)
    del rows[0][1:]
    assert copied == [[1, 2, 3], [4]]

    class Array:  # numpy-like: tolist() makes the copy
        def tolist(self) -> list[int]:
            return [7, 8]

    assert copy_rows([Array(), None]) == [[7, 8], None]
    assert copy_ids((1, 2)) == [1, 2]
