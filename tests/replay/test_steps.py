"""vLLM's step rules as replay applies them: hand-built requests, hand-computed events."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenlens.capture.events import build_capture
from tokenlens.capture.recorder import StepRecorder
from tokenlens.replay.steps import (
    Branch,
    DraftModelView,
    NeedLookahead,
    NgramView,
    Row,
    Tokens,
    replay_request,
)

BIG = 10_000  # a max_model_len that never binds


def fixed(drafts: dict[int, list[int]]) -> NgramView:
    """A proposer with given drafts at given lengths (none elsewhere)."""
    top = max(drafts) + 1
    return NgramView(tuple(tuple(drafts.get(i, ())) for i in range(top + 50)))


def as_tuples(rows: list[Row]) -> list[tuple[object, ...]]:
    return [(r.step, r.position, r.draft, r.accepted, r.emitted, r.output_index) for r in rows]


def test_first_token_comes_from_prefill_and_steps_start_after_it() -> None:
    tokens = Tokens("r", prompt_len=5, output=(10, 11, 12, 13))
    rows = replay_request(tokens, fixed({1: [11, 12]}), k=2, max_model_len=BIG)
    # step 0 starts at output index 1 (index 0 was sampled by the prefill step):
    # both drafts accepted, bonus token 13 emitted, request done.
    assert as_tuples(rows) == [(0, 0, 11, True, 11, 1), (0, 1, 12, True, 12, 2)]


def test_rejection_emits_the_target_token_and_nothing_after_it() -> None:
    tokens = Tokens("r", prompt_len=3, output=(10, 11, 12, 13, 14))
    rows = replay_request(tokens, fixed({1: [11, 99, 98], 3: [13]}), k=3, max_model_len=BIG)
    assert as_tuples(rows) == [
        (0, 0, 11, True, 11, 1),
        (0, 1, 99, False, 12, 2),  # the correction: the target's own token
        (0, 2, 98, False, None, None),
        (1, 0, 13, True, 13, 3),  # next step starts after the correction
    ]


def test_no_proposal_is_a_plain_decode_step_that_vllm_does_not_count() -> None:
    tokens = Tokens("r", prompt_len=3, output=(10, 11, 12, 13))
    rows = replay_request(tokens, fixed({2: [12, 50]}), k=2, max_model_len=BIG)
    assert as_tuples(rows) == [(0, 0, 12, True, 12, 2), (0, 1, 50, False, 13, 3)]


def test_stop_mid_step_judges_drafts_past_the_end_against_the_lookahead() -> None:
    # Output ends at index 2 (EOS or max_tokens); drafts at 1..3 reach past it.
    short = Tokens("r", prompt_len=3, output=(10, 11, 12))
    with pytest.raises(NeedLookahead) as missing:
        replay_request(short, fixed({1: [11, 12, 40]}), k=3, max_model_len=BIG)
    assert missing.value.count == 1
    ahead = Tokens("r", prompt_len=3, output=(10, 11, 12), lookahead=(40, 41))
    rows = replay_request(ahead, fixed({1: [11, 12, 40]}), k=3, max_model_len=BIG)
    # all three accepted by vLLM (counted), the third was cut by the stop
    assert as_tuples(rows) == [
        (0, 0, 11, True, 11, 1),
        (0, 1, 12, True, 12, 2),
        (0, 2, 40, True, 40, None),
    ]
    rejected = Tokens("r", prompt_len=3, output=(10, 11, 12), lookahead=(77,))
    rows = replay_request(rejected, fixed({1: [11, 12, 40]}), k=3, max_model_len=BIG)
    assert as_tuples(rows)[-1] == (0, 2, 40, False, 77, None)


def test_drafts_are_capped_so_the_sampled_token_fits_max_model_len() -> None:
    # prompt 5 + output 4 = 9 tokens = max_model_len (vLLM stopped the request there).
    tokens = Tokens("r", prompt_len=5, output=(10, 11, 12, 13))
    rows = replay_request(tokens, fixed({1: [11, 12, 13]}), k=3, max_model_len=9)
    # at L=1: room = 9 - 5 - 1 - 1 = 2 drafts
    assert [(r.step, r.position) for r in rows] == [(0, 0), (0, 1)]


@pytest.mark.parametrize("kind", ["draft_model", "ngram"])
def test_zeros_are_drafted_when_the_step_would_not_fit_the_drafter(kind: str) -> None:
    out = (10, 11, 12, 13, 14, 15)
    view = (
        DraftModelView(output=out, argmax=out, continuation=(16, 17))
        if kind == "draft_model"
        else fixed({i: list(out[i : i + 2]) for i in range(1, 6)})
    )
    rows = replay_request(
        Tokens("r", 5, out), view, k=2, max_model_len=100, drafter_max_model_len=12
    )
    # prefill seq_len 5: 5+2 <= 12 -> real drafts at L=1 (accepted 11, 12; bonus 13);
    # that step's seq_len 5+1+2 = 8: 8+2 <= 12 -> real drafts at L=4;
    # then 5+4+2 = 11: 11+2 > 12 -> vLLM drafts zeros (none left here: output ends).
    assert [r.draft for r in rows] == [11, 12, 14, 15]
    rows = replay_request(
        Tokens("r", 5, out), view, k=2, max_model_len=100, drafter_max_model_len=9
    )
    # 8+2 > 9: zeros at L=4 (rejected: the target said 14), and again at L=5
    assert [r.draft for r in rows] == [11, 12, 0, 0, 0, 0]
    assert [r.emitted for r in rows if not r.accepted and r.emitted is not None] == [14, 15]


def test_draft_model_view_branches_after_the_first_wrong_draft() -> None:
    out = (10, 11, 12, 13, 14)
    argmax = (-1, 11, 55, 13, 14)  # the drafter's greedy token at each index
    view = DraftModelView(output=out, argmax=argmax, continuation=(90, 91, 92))
    assert view(1, 4) == [11, 55, Branch(2, 0), Branch(2, 1)]
    assert view(3, 4) == [13, 14, 90, 91]  # past the end: its own continuation


def test_capture_reads_replayed_steps_back_into_the_same_rows(tmp_path: Path) -> None:
    """The rows replay writes are what the capture would build from vLLM's step records."""
    out = (10, 11, 12, 13, 14, 15, 16)
    ahead = (17, 18)
    proposer = fixed({1: [11, 12, 99], 3: [13, 14, 15], 6: [16, 17, 50]})
    tokens = Tokens("req", prompt_len=4, output=out, lookahead=ahead)
    rows = replay_request(tokens, proposer, k=3, max_model_len=BIG)
    target = out + ahead
    recorder = StepRecorder(tmp_path)
    done = 0  # output tokens appended so far
    for step in [*sorted({r.step for r in rows}), None]:
        mine = [r for r in rows if r.step == step]
        start = mine[0].output_index if mine else len(out)
        assert isinstance(start, int)
        for plain in range(done, start):  # prefill and plain decode steps: no drafts
            recorder.write_step([{"r": "req", "b": plain, "g": [out[plain]], "n": 1}])
        if not mine:
            break
        accepted = sum(r.accepted for r in mine)
        generated = list(target[start : start + accepted + 1])
        kept = min(len(generated), len(out) - start)
        drafts = [int(r.draft) for r in mine if isinstance(r.draft, int)]
        record = {"r": "req", "b": start, "g": generated, "n": kept, "d": drafts, "a": accepted}
        recorder.write_step([record])
        done = start + kept
    recorder.close()
    capture = build_capture(tmp_path, id_map={"req": "req"})
    table = capture.table().to_pylist()
    assert [
        tuple(e[c] for c in ("step", "position", "draft_token_id", "accepted"))
        + tuple(e[c] for c in ("emitted_token_id", "output_index"))
        for e in table
    ] == as_tuples(rows)
    assert capture.outputs["req"] == list(out)


@st.composite
def requests(draw: st.DrawFn) -> tuple[Tokens, NgramView, int]:
    vocab = st.integers(0, 3)  # a tiny vocabulary: many accepted drafts
    out = tuple(draw(st.lists(vocab, min_size=1, max_size=30)))
    ahead = tuple(draw(st.lists(vocab, min_size=8, max_size=8)))
    k = draw(st.integers(1, 5))
    proposals = tuple(tuple(draw(st.lists(vocab, max_size=k))) for _ in range(len(out) + 1))
    return Tokens("r", draw(st.integers(1, 20)), out, ahead), NgramView(proposals), k


@given(requests())
@settings(max_examples=300, deadline=None)
def test_replayed_rows_keep_the_contract(case: tuple[Tokens, NgramView, int]) -> None:
    tokens, view, k = case
    rows = replay_request(tokens, view, k=k, max_model_len=BIG)
    target = tokens.output + tokens.lookahead
    covered = set()
    for step in {r.step for r in rows}:
        mine = sorted((r for r in rows if r.step == step), key=lambda r: r.position)
        assert [r.position for r in mine] == list(range(len(mine)))
        flags = [r.accepted for r in mine]
        assert flags == sorted(flags, reverse=True)  # accepted drafts form a prefix
        for r in mine:
            if r.accepted:
                assert r.emitted == r.draft
            if r.output_index is not None:
                assert tokens.output[r.output_index] == r.emitted
                covered.add(r.output_index)
            elif r.emitted is not None:
                assert r.emitted == target[mine[0].output_index + r.position]  # type: ignore[operator]
    assert covered <= set(range(1, len(tokens.output)))
