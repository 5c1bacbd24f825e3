"""The shared test helpers that vLLM tests depend on, checked without vLLM."""

from __future__ import annotations

import pytest

from tests.support import first_divergence


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([1, 2, 3], [1, 2, 3], None),
        ([], [], None),
        ([1, 2, 3], [1, 9, 3], 1),
        ([5], [6], 0),
        # One output a prefix of the other: the shorter one's length, not StopIteration
        # (test_greedy_speculation_matches_plain_decoding reports it as a failure).
        ([1, 2], [1, 2, 3], 2),
        ([1, 2, 3], [1, 2], 2),
        ([], [1], 0),
    ],
)
def test_first_divergence(a: list[int], b: list[int], expected: int | None) -> None:
    assert first_divergence(a, b) == expected
