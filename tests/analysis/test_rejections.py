"""Rejections by kind: split (the target wrote the draft's very text, cut differently)
or text, and the UTF-8-partial flags, by hand and on a hand-built run.

Qwen2.5 has no single token for 東京 (it writes 東 then 京), so the hand-built run
reads its ids with the Qwen2.5 vocabulary plus one added token, 東京 (id 151936 + 0):
what a drafter with that merge would propose.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.analysis.handbuilt import write_run
from tokenlens.analysis.join import join_run
from tokenlens.analysis.rejections import (
    SPLIT,
    TEXT,
    UNKNOWN,
    ends_inside_char,
    rejection_kind,
)
from tokenlens.rundir import read_run
from tokenlens.text import Vocabulary, load_tokenizer

TOKYO_CHARS = "東京".encode()
HIGASHI, KYO, NISHI = 102356, 46553, 60686  # 東 京 西 in Qwen2.5
HIGASHI_LEAD = 13949  # b"\xe6\x9d": the first two bytes of 東


def test_kind_by_hand() -> None:
    assert rejection_kind(TOKYO_CHARS, "東".encode() + "京".encode(), True) == SPLIT
    assert rejection_kind(TOKYO_CHARS, "東".encode() + "西".encode(), True) == TEXT
    assert rejection_kind("東".encode(), "東京".encode(), True) == SPLIT  # the target's longer
    # the output ends after 東: what there is agrees, the rest is unknown
    assert rejection_kind(TOKYO_CHARS, "東".encode(), False) == UNKNOWN
    assert rejection_kind(TOKYO_CHARS, "西".encode(), False) == TEXT
    assert rejection_kind(b"", b"x", True) == UNKNOWN


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


def test_split_and_text_on_a_hand_built_run(tmp_path: Path) -> None:
    vocab = vocabulary()
    tokyo = len(vocab.token_bytes) - 1
    requests = [
        ("ja-1", "ja", "p1", [HIGASHI, KYO], "東京"),
        ("ja-2", "ja", "p2", [HIGASHI, NISHI], "東西"),
        ("ja-3", "ja", "p3", [HIGASHI, KYO], "東京"),
        ("en-1", "en", "p1", [785, 3974], "The quick"),
        ("en-2", "en", "p2", [785, 3974], "The quick"),
        ("en-3", "en", "p3", [785, 3974], "The quick"),
    ]
    events = [
        # the drafter proposed 東京 where the target wrote 東 then 京: split
        ("ja-1", 0, 0, tokyo, False, HIGASHI, 0),
        # the drafter proposed 東京 where the target wrote 東 then 西: text
        ("ja-2", 0, 0, tokyo, False, HIGASHI, 0),
        # the drafter proposed two bytes of 東 where the target wrote 東: split, and the
        # draft ends inside a character
        ("ja-3", 0, 0, HIGASHI_LEAD, False, HIGASHI, 0),
        ("en-1", 0, 0, 785, True, 785, 0),
        ("en-1", 0, 1, 11, False, 3974, 1),
        ("en-2", 0, 0, 785, True, 785, 0),
        ("en-3", 0, 0, -1, False, 785, 0),  # the draft is hidden: no kind
    ]
    path = write_run(tmp_path / "run", "draft_model", 2, events, requests=requests)
    frame = join_run(read_run(path), "run", vocab)
    by = {
        (r.request_id, r.position): r
        for r in frame[
            ["request_id", "position", "rejection_kind", "draft_partial", "emitted_partial"]
        ].itertuples()
    }
    assert by[("ja-1", 0)].rejection_kind == SPLIT
    assert by[("ja-2", 0)].rejection_kind == TEXT
    assert by[("ja-3", 0)].rejection_kind == SPLIT
    assert bool(by[("ja-3", 0)].draft_partial) and not bool(by[("ja-3", 0)].emitted_partial)
    assert not bool(by[("ja-1", 0)].draft_partial)
    assert by[("en-1", 1)].rejection_kind == TEXT  # "," against " quick"
    for key in (("en-1", 0), ("en-2", 0), ("en-3", 0)):  # accepted, or the draft hidden
        assert pd.isna(by[key].rejection_kind) and pd.isna(by[key].draft_partial)


def test_summary_shares_per_family_and_language(tmp_path: Path) -> None:
    from tokenlens.analysis.bootstrap import Resampler
    from tokenlens.analysis.rejections import rejection_section
    from tokenlens.analysis.verdicts import families

    vocab = vocabulary()
    tokyo = len(vocab.token_bytes) - 1
    requests = [
        ("ja-1", "ja", "p1", [HIGASHI, KYO], "東京"),
        ("ja-2", "ja", "p2", [HIGASHI, NISHI], "東西"),
        ("en-1", "en", "p1", [785, 3974], "The quick"),
        ("en-2", "en", "p2", [785, 3974], "The quick"),
    ]
    events = [
        ("ja-1", 0, 0, tokyo, False, HIGASHI, 0),
        ("ja-2", 0, 0, tokyo, False, HIGASHI, 0),
        ("en-1", 0, 0, 11, False, 785, 0),
        ("en-2", 0, 0, 11, False, 785, 0),
    ]
    path = write_run(tmp_path / "run", "draft_model", 1, events, requests=requests)
    frame = join_run(read_run(path), "run", vocab)
    rs = Resampler.from_frame(frame, 50, 0)
    out = rejection_section(frame, rs, families(frame))
    assert out is not None
    block = out["families"]["trained"]
    assert block["rejections"] == {"ja": 2, "en": 2}
    assert block["split"]["ja"]["share"] == pytest.approx(0.5)
    assert block["split"]["ja"]["count"] == 1 and block["split"]["ja"]["n"] == 2
    assert block["split"]["en"]["share"] == 0.0
    assert block["text"]["en"]["share"] == 1.0
    assert block["split_gap"]["value"] == pytest.approx(0.5)
