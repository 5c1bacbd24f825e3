"""Rejections by kind (merge, confirmed, prefix_diverged, prefix_open, text), defined by
what the drafter wrote, by hand and on hand-built runs; the UTF-8-partial and
whitespace flags; the summary's shares per family and per run.

Qwen2.5 has no single token for 東京 (it writes 東 then 京), so the hand-built runs
read their ids with the Qwen2.5 vocabulary plus one added token, 東京 (id 151936 + 0):
what a drafter, or a target, with that merge would write.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.analysis.handbuilt import Event, write_run
from tokenlens.analysis.join import join_run
from tokenlens.analysis.rejections import (
    CONFIRMED,
    KINDS,
    MERGE,
    PREFIX_DIVERGED,
    PREFIX_OPEN,
    TEXT,
    UNKNOWN,
    ends_inside_char,
    rejection_kind,
    whitespace_cut,
)
from tokenlens.analysis.summary_sections import REJECTION_KINDS
from tokenlens.rundir import read_run
from tokenlens.text import Vocabulary, load_tokenizer

TOKYO_CHARS = "東京".encode()
HIGASHI, KYO, NISHI = 102356, 46553, 60686  # 東 京 西 in Qwen2.5
HIGASHI_LEAD = 13949  # b"\xe6\x9d": the first two bytes of 東
A, NEW, AFFECTING = 264, 501, 27887  # " a", " new", " affecting"
MARU, MARU_BREAK, BREAK = 1773, 3407, 271  # "。", "。\n\n", "\n\n"
E = "東".encode()


def test_kind_by_hand() -> None:
    # merge: the draft is longer, and the target's text starts with it
    assert rejection_kind(TOKYO_CHARS, E, TOKYO_CHARS + b"x", True, TOKYO_CHARS) == MERGE
    assert rejection_kind(TOKYO_CHARS, E, "東西".encode(), True, TOKYO_CHARS) == TEXT
    # the output ends after 東: what there is agrees, the rest is unknown (no kind)
    assert rejection_kind(TOKYO_CHARS, E, E, False, TOKYO_CHARS) == UNKNOWN
    assert rejection_kind(TOKYO_CHARS, "西".encode(), "西".encode(), False, b"") == TEXT
    # a strict prefix: the drafter's continuation decides
    assert rejection_kind(E, TOKYO_CHARS, TOKYO_CHARS, True, TOKYO_CHARS) == CONFIRMED
    assert rejection_kind(E, TOKYO_CHARS, TOKYO_CHARS, True, TOKYO_CHARS + b"!") == CONFIRMED
    assert rejection_kind(E, TOKYO_CHARS, TOKYO_CHARS, True, "東西".encode()) == PREFIX_DIVERGED
    assert rejection_kind(E, TOKYO_CHARS, TOKYO_CHARS, True, E) == PREFIX_OPEN
    assert rejection_kind(b" a", b" affecting", b" affecting", True, b" a new") == PREFIX_DIVERGED
    # the same bytes under another id, or other text: text
    assert rejection_kind(E, E, E, True, E) == TEXT
    assert rejection_kind(b" the", b" a", b" a", True, b" the") == TEXT
    assert rejection_kind(b"", b"x", b"x", True, b"") == UNKNOWN
    assert set(KINDS) == set(REJECTION_KINDS)  # the summary reader names the same kinds


def test_whitespace_cut() -> None:
    assert whitespace_cut("。".encode(), "。\n\n".encode())
    assert whitespace_cut(b"x\n", b"x")
    assert not whitespace_cut(b" ", b" the")
    assert not whitespace_cut(E, TOKYO_CHARS)


def test_ends_inside_a_character() -> None:
    assert ends_inside_char(b"\xe6\x9d")  # two of 東's three bytes
    assert not ends_inside_char("東".encode())
    assert not ends_inside_char(b"ab")
    assert ends_inside_char(b"a\xf0\x9f\x98")  # three of an emoji's four
    assert not ends_inside_char(b"\x9d\xb1")  # continuation bytes only: malformed, not inside
    assert not ends_inside_char(b"")


def vocabulary() -> Vocabulary:
    """Qwen2.5 plus one token, 東京, at the first free id."""
    base = load_tokenizer("qwen2.5")
    return dataclasses.replace(
        base,
        name="qwen2.5+tokyo",
        identity="qwen2.5 + 東京 (test)",
        token_bytes=(*base.token_bytes, TOKYO_CHARS),
        special_mask=np.append(base.special_mask, False),
        bpe_rank=np.append(base.bpe_rank, 0),
    )


TOKYO = len(vocabulary().token_bytes) - 1


def kinds_of(tmp_path: Path, k: int, requests: list, events: list[Event]) -> pd.DataFrame:
    path = write_run(tmp_path / "run", "draft_model", k, events, requests=requests)
    frame = join_run(read_run(path), "run", vocabulary())
    return frame.set_index(["request_id", "step", "position"])


def test_each_kind_on_a_hand_built_run(tmp_path: Path) -> None:
    requests = [
        ("ja-1", "ja", "p1", [HIGASHI, KYO], "東京"),  # the target wrote 東, 京
        ("ja-2", "ja", "p2", [TOKYO, NISHI], "東京西"),  # the target wrote 東京
        ("ja-3", "ja", "p3", [NISHI, TOKYO], "西東京"),
        ("ja-4", "ja", "p4", [TOKYO, NISHI], "東京西"),
        ("ja-5", "ja", "p5", [HIGASHI, NISHI], "東西"),
        ("en-1", "en", "p1", [AFFECTING, NEW], " affecting new"),
        ("en-2", "en", "p2", [MARU_BREAK], "。\n\n"),
        ("en-3", "en", "p3", [HIGASHI], "東"),
    ]
    events: list[Event] = [
        # draft 東京 where the target wrote 東, 京: merge
        ("ja-1", 0, 0, TOKYO, False, HIGASHI, 0),
        ("ja-1", 0, 1, NISHI, False, None, None),
        # draft 東 then 京 where the target wrote 東京: confirmed
        ("ja-2", 0, 0, HIGASHI, False, TOKYO, 0),
        ("ja-2", 0, 1, KYO, False, None, None),
        # draft 東 at the step's last position where the target wrote 東京: prefix_open
        ("ja-3", 0, 0, NISHI, True, NISHI, 0),
        ("ja-3", 0, 1, HIGASHI, False, TOKYO, 1),
        # draft 東, then a draft the run does not know (-1): prefix_open, never guessed
        ("ja-4", 0, 0, HIGASHI, False, TOKYO, 0),
        ("ja-4", 0, 1, -1, False, None, None),
        # draft 東京 where the target wrote 東, 西: text
        ("ja-5", 0, 0, TOKYO, False, HIGASHI, 0),
        ("ja-5", 0, 1, KYO, False, None, None),
        # draft " a" then " new" where the target wrote " affecting": prefix_diverged
        ("en-1", 0, 0, A, False, AFFECTING, 0),
        ("en-1", 0, 1, NEW, False, None, None),
        # draft 。 then \n\n where the target wrote 。\n\n: confirmed, at whitespace
        ("en-2", 0, 0, MARU, False, MARU_BREAK, 0),
        ("en-2", 0, 1, BREAK, False, None, None),
        # draft 東京 where the output ends after 東 (max_tokens): unknown
        ("en-3", 0, 0, TOKYO, False, HIGASHI, 0),
        ("en-3", 0, 1, NISHI, False, None, None),
    ]
    frame = kinds_of(tmp_path, 2, requests, events)
    kind = frame["rejection_kind"].astype(object)
    assert kind[("ja-1", 0, 0)] == MERGE
    assert kind[("ja-2", 0, 0)] == CONFIRMED
    assert kind[("ja-3", 0, 1)] == PREFIX_OPEN
    assert kind[("ja-4", 0, 0)] == PREFIX_OPEN
    assert kind[("ja-5", 0, 0)] == TEXT
    assert kind[("en-1", 0, 0)] == PREFIX_DIVERGED
    assert kind[("en-2", 0, 0)] == CONFIRMED
    assert kind[("en-3", 0, 0)] == UNKNOWN
    # accepted rows and the rows after a rejection have no kind
    for key in (("ja-3", 0, 0), ("ja-1", 0, 1), ("ja-2", 0, 1), ("en-1", 0, 1)):
        assert pd.isna(kind[key])
    space = frame["rejection_whitespace"]
    assert bool(space[("en-2", 0, 0)]) and not bool(space[("ja-2", 0, 0)])
    assert not bool(space[("ja-1", 0, 0)]) and not bool(space[("en-1", 0, 0)])
    assert pd.isna(space[("en-3", 0, 0)])  # no kind, no flag


def test_utf8_flags_and_hidden_drafts(tmp_path: Path) -> None:
    requests = [
        ("ja-1", "ja", "p1", [HIGASHI, KYO], "東京"),
        ("en-1", "en", "p1", [785, 3974], "The quick"),
    ]
    events: list[Event] = [
        # two bytes of 東 where the target wrote 東: the draft ends inside a character
        ("ja-1", 0, 0, HIGASHI_LEAD, False, HIGASHI, 0),
        ("en-1", 0, 0, 785, True, 785, 0),
        ("en-1", 0, 1, -1, False, 3974, 1),  # the rejected draft itself is hidden: no kind
    ]
    frame = kinds_of(tmp_path, 2, requests, events)
    assert frame["rejection_kind"].astype(object)[("ja-1", 0, 0)] == PREFIX_OPEN
    assert bool(frame["draft_partial"][("ja-1", 0, 0)])
    assert not bool(frame["emitted_partial"][("ja-1", 0, 0)])
    assert pd.isna(frame["rejection_kind"][("en-1", 0, 1)])


def test_summary_shares_per_family_and_run(tmp_path: Path) -> None:
    from tokenlens.analysis.bootstrap import Resampler
    from tokenlens.analysis.parts import families
    from tokenlens.analysis.rejection_summary import rejection_section

    requests = [
        ("ja-1", "ja", "p1", [HIGASHI, KYO], "東京"),
        ("ja-2", "ja", "p2", [HIGASHI, NISHI], "東西"),
        ("en-1", "en", "p1", [785, 3974], "The quick"),
        ("en-2", "en", "p2", [785, 3974], "The quick"),
    ]
    events: list[Event] = [
        ("ja-1", 0, 0, TOKYO, False, HIGASHI, 0),
        ("ja-2", 0, 0, TOKYO, False, HIGASHI, 0),
        ("en-1", 0, 0, 11, False, 785, 0),
        ("en-2", 0, 0, 11, False, 785, 0),
    ]
    path = write_run(tmp_path / "run", "draft_model", 1, events, requests=requests)
    frame = join_run(read_run(path), "run", vocabulary())
    rs = Resampler.from_frame(frame, 50, 0)
    out = rejection_section(frame, rs, families(frame))
    assert out is not None
    assert out["kinds"] == list(KINDS)
    for block in (out["families"]["trained"], out["runs"]["run"]):
        assert block["rejections"] == {"ja": 2, "en": 2}
        assert block[MERGE]["ja"]["share"] == pytest.approx(0.5)
        assert block[MERGE]["ja"]["count"] == 1 and block[MERGE]["ja"]["n"] == 2
        assert block["resegmentation"]["ja"]["count"] == 1
        assert block[MERGE]["en"]["share"] == 0.0
        assert block[TEXT]["en"]["share"] == 1.0
        assert block["resegmentation_gap"]["value"] == pytest.approx(0.5)
    run = out["runs"]["run"]
    assert (run["method"], run["k"], run["family"]) == ("draft_model", 1, "trained")
    assert run["continuation"] == "none proposed"  # k = 1: no draft follows a rejection
