"""The simulated step process against hand-worked examples and against real vLLM traces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tokenlens.testing.step_process import StepEvents, speculate

DATA = Path(__file__).parent / "data" / "real_events.json"


def _one(agree: str, length: int, k: int, offer: str | None = None) -> StepEvents:
    """Events of one request; ``agree``/``offer`` as strings of 0/1 per output position."""
    a = np.array([c == "1" for c in agree])
    o = np.ones_like(a) if offer is None else np.array([c == "1" for c in offer])
    return speculate(a[None, :], o[None, :], np.array([length]), k)


def _rows(ev: StepEvents) -> list[tuple[int, int, bool, bool, int]]:
    return [
        (int(s), int(p), bool(a), bool(j), int(o))
        for s, p, a, j, o in zip(
            ev.step, ev.position, ev.accepted, ev.judged, ev.output_index, strict=True
        )
    ]


def test_all_accepted_steps_add_a_bonus_token() -> None:
    # position 0 is prefill; step 0 drafts 1..3 (all accepted) + bonus 4; step 1 drafts 5..7
    # + bonus 8; 9 tokens are out, so the request stops.
    ev = _one("1" * 13, length=9, k=3)
    assert _rows(ev) == [
        (0, 0, True, True, 1),
        (0, 1, True, True, 2),
        (0, 2, True, True, 3),
        (1, 0, True, True, 5),
        (1, 1, True, True, 6),
        (1, 2, True, True, 7),
    ]


def test_first_rejection_ends_the_step() -> None:
    # step 0 at 1: 1 accepted, 2 rejected (the target's token comes out at 2), draft 3 never
    # compared; step 1 at 3: rejected at once; step 2 at 4: 4, 5 accepted, 6 rejected.
    ev = _one("0" + "10" + "0" + "110" + "000", length=7, k=3)
    assert _rows(ev) == [
        (0, 0, True, True, 1),
        (0, 1, False, True, 2),
        (0, 2, False, False, -1),
        (1, 0, False, True, 3),
        (1, 1, False, False, -1),
        (1, 2, False, False, -1),
        (2, 0, True, True, 4),
        (2, 1, True, True, 5),
        (2, 2, False, True, 6),
    ]
    assert ev.index.tolist() == [1, 2, -1, 3, -1, -1, 4, 5, 6]


def test_no_offer_means_a_plain_step_without_events() -> None:
    # The n-gram drafter finds no match at 1 and 2: two plain decode steps, not counted.
    ev = _one("0" + "1111" + "000", length=5, k=2, offer="0" + "001" + "1111")
    assert _rows(ev) == [(0, 0, True, True, 3), (0, 1, True, True, 4)]


def test_last_step_drafts_past_the_end() -> None:
    # 4 tokens: the step at 1 drafts 1..3 and all are accepted; with length 3 the draft
    # at 3 is still judged (vLLM compared it) but has no output index.
    assert [r[4] for r in _rows(_one("1" * 8, length=4, k=3))] == [1, 2, 3]
    cut = _rows(_one("1" * 8, length=3, k=3))
    assert cut == [(0, 0, True, True, 1), (0, 1, True, True, 2), (0, 2, True, True, -1)]
    # a rejection past the end is judged too
    assert _rows(_one("011000", length=3, k=3))[2] == (0, 2, False, True, -1)


def test_k1_and_vectorised_requests_agree_with_one_by_one() -> None:
    rng = np.random.default_rng(3)
    agree = rng.random((6, 40)) < 0.7
    offer = rng.random((6, 40)) < 0.8
    length = rng.integers(5, 35, size=6)
    for k in (1, 2, 4):
        together = speculate(agree, offer, length, k)
        for r in range(6):
            alone = speculate(agree[r : r + 1], offer[r : r + 1], length[r : r + 1], k)
            mine = together.request == r
            assert _rows(alone) == [x for x, m in zip(_rows(together), mine, strict=True) if m]


def test_counts_follow_the_step_rule() -> None:
    rng = np.random.default_rng(5)
    agree = rng.random((50, 70)) < 0.6
    length = rng.integers(10, 64, size=50)
    ev = speculate(agree, np.ones_like(agree), length, 3)
    steps = ev.request * 1000 + ev.step
    for s in np.unique(steps):
        rows = steps == s
        n_acc = int(ev.accepted[rows].sum())
        assert ev.judged[rows].sum() == min(n_acc + 1, 3)
        assert (ev.accepted[rows] == (ev.position[rows] < n_acc)).all()
    # every output position 1..length-1 comes out exactly once: a judged row or a bonus
    for r in range(50):
        mine = ev.request == r
        out = ev.output_index[mine & (ev.output_index >= 0)]
        assert len(set(out.tolist())) == len(out)
        per_step = np.bincount(ev.step[mine], weights=ev.accepted[mine]) == 3
        assert len(out) + per_step.sum() >= length[r] - 1


def test_bad_shapes_raise() -> None:
    with pytest.raises(ValueError, match="max"):
        speculate(np.ones((1, 5), bool), np.ones((1, 5), bool), np.array([4]), 3)
    with pytest.raises(ValueError, match="k must"):
        speculate(np.ones((1, 9), bool), np.ones((1, 9), bool), np.array([4]), 0)


def _real() -> list[dict[str, object]]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    requests: list[dict[str, object]] = data["requests"]
    return requests


@pytest.mark.parametrize("req", _real(), ids=lambda r: f"{r['run']}/{r['request_id']}")
def test_reproduces_real_vllm_events(req: dict[str, object]) -> None:
    """Agreement read off a real trace, fed back: the same events row for row.

    Every output position is either judged in some step (accepted: agrees; first
    rejection: disagrees), a bonus token, or decoded without drafts (n-gram found no
    match: no offer). That is all speculate() needs; unjudged drafts are irrelevant.
    """
    rows = req["events"]
    assert isinstance(rows, list)
    length = int(str(req["length"]))
    k = 3
    agree = np.zeros(length + k + 1, dtype=bool)
    offer = np.zeros(length + k + 1, dtype=bool)
    start = 0
    for _step, pos, accepted, judged, out in rows:
        if pos == 0:
            start = out
            offer[start] = True
        if judged:
            agree[start + pos] = accepted
    ev = speculate(agree[None, :], offer[None, :], np.array([length]), k)
    want = [(s, p, a, j, o) for s, p, a, j, o in rows]
    assert _rows(ev) == want
