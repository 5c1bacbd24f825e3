"""Property tests: spans tile every text, every token gets one class, nothing raises."""

from __future__ import annotations

import itertools
import unicodedata
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textlayer_strategies import text_strategy

from tokenlens.text.classify import BOUNDARIES, SCRIPTS, TOKEN_SCHEMA, classify_tokens
from tokenlens.text.morph import segment
from tokenlens.text.spans import Spans, display_texts, token_spans
from tokenlens.text.tokenizers import Vocabulary, load_tokenizer

SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def check_spans(sp: Spans, pieces: list[bytes]) -> None:
    """Byte spans tile the bytes; char spans tile the text, sharing only split characters."""
    data = b"".join(pieces)
    assert sp.data == data
    assert sp.text == data.decode("utf-8", "replace")
    n_bytes, n_chars = len(data), len(sp.text)
    pos = 0
    for i, p in enumerate(pieces):
        assert sp.byte_start[i] == pos
        pos += len(p)
        assert sp.byte_end[i] == pos
        assert data[sp.byte_start[i] : sp.byte_end[i]] == p
    assert pos == n_bytes
    shown = display_texts(sp)  # every character once, on the token of its first byte
    assert "".join(shown) == sp.text
    for i, p in enumerate(pieces):
        first_bytes = range(int(sp.byte_start[i]), int(sp.byte_end[i]))
        mine = range(int(sp.char_start[i]), int(sp.char_end[i]))
        assert shown[i] == "".join(sp.text[c] for c in mine if sp.char_byte[c] in first_bytes)
        if not sp.fragment[i]:
            assert shown[i].encode("utf-8") == p
    nonempty = [i for i, p in enumerate(pieces) if p]
    if not nonempty:
        return
    assert sp.char_start[nonempty[0]] == 0
    assert sp.char_end[nonempty[-1]] == n_chars
    starts = set(sp.char_byte.tolist())
    for i, j in itertools.pairwise(nonempty):
        boundary = int(sp.byte_end[i])
        if boundary in starts:  # the cut falls between characters
            assert sp.char_start[j] == sp.char_end[i]
        else:  # the cut splits a character: both tokens hold it
            assert sp.char_start[j] == sp.char_end[i] - 1
            assert sp.fragment[i] and sp.fragment[j]
    for i in nonempty:
        cs, ce = int(sp.char_start[i]), int(sp.char_end[i])
        assert 0 <= cs < ce <= n_chars
        if not sp.fragment[i]:
            # A whole-character token is exactly its characters.
            assert sp.text[cs:ce].encode("utf-8") == pieces[i]
        else:
            # A fragment's bytes lie inside the bytes of the characters it belongs to.
            assert sp.char_byte[cs] <= sp.byte_start[i] and sp.byte_end[i] <= sp.char_byte[ce]


def check_table(table: pa.Table, n: int) -> None:
    assert table.schema == TOKEN_SCHEMA
    assert table.num_rows == n
    for col, allowed in (("script", SCRIPTS), ("boundary", BOUNDARIES)):
        values = table.column(col).to_pylist()
        assert all(v in allowed for v in values), set(values) - set(allowed)
    assert table.column("pos").null_count == 0
    frag = np.asarray(table.column("script").to_pylist()) == "byte_fragment"
    bfrag = np.asarray(table.column("boundary").to_pylist()) == "fragment"
    assert (frag == bfrag).all()  # the two views of "part of a character" agree


@SETTINGS
@given(text=text_strategy(), lang=st.sampled_from(["ja", "en"]))
def test_encoded_text_tiles_and_classifies(vocab: Vocabulary, text: str, lang: str) -> None:
    ids = vocab.encode(text)
    pieces = vocab.pieces(ids)
    sp = token_spans(pieces)
    check_spans(sp, pieces)
    # Decoding the spans reproduces the text the model saw (Qwen normalises to NFC).
    assert sp.text == unicodedata.normalize("NFC", text)
    assert (
        b"".join(sp.data[s:e] for s, e in zip(sp.byte_start, sp.byte_end, strict=True))
        == sp.text.encode()
    )
    check_table(classify_tokens(ids, vocab, lang), len(ids))


@SETTINGS
@given(data=st.data(), lang=st.sampled_from(["ja", "en"]))
def test_arbitrary_id_sequences_never_raise(
    vocab: Vocabulary, data: st.DataObject, lang: str
) -> None:
    """Generations can stop mid-character or emit bytes that never form one."""
    ids = data.draw(
        st.lists(
            st.one_of(
                st.integers(0, 300),  # single bytes: fragments galore
                st.integers(0, vocab.size + 50),  # anything, incl. specials and holes
            ),
            max_size=40,
        )
    )
    pieces = vocab.pieces(ids)
    check_spans(token_spans(pieces), pieces)
    check_table(classify_tokens(ids, vocab, lang), len(ids))


@SETTINGS
@given(text=text_strategy(), cut=st.integers(0, 200))
def test_sequence_ending_mid_character(vocab: Vocabulary, text: str, cut: int) -> None:
    ids = vocab.encode(text + "𠮷漢")[:cut]
    pieces = vocab.pieces(ids)
    check_spans(token_spans(pieces), pieces)
    check_table(classify_tokens(ids, vocab, "ja"), len(ids))


@settings(max_examples=200, deadline=None)
@given(text=text_strategy(), lang=st.sampled_from(["ja", "en"]))
def test_units_tile_text(text: str, lang: str) -> None:
    units = segment(text, lang)
    if not text:
        assert len(units) == 0
        return
    assert units.start[0] == 0 and units.end[-1] == len(text)
    assert (units.start[1:] == units.end[:-1]).all()
    assert (units.end > units.start).all()
    assert len(units.pos1) == len(units.pos2) == len(units)


@settings(max_examples=150, deadline=None)
@given(text=text_strategy())
def test_mecab_offsets_match_fugashi_surfaces(text: str) -> None:
    """Reading MeCab's byte offsets gives the same morphemes as fugashi's own nodes."""

    text = text.replace("\x00", "")  # fugashi's node API stops at NUL; ours does not
    units = segment(text, "ja")
    # Whitespace is compared apart: MeCab skips most of it (our gap units) but emits
    # some as 空白 morphemes; both end up as whitespace units.
    ours = [
        (text[s:e], p1, p2)
        for s, e, p1, p2 in zip(units.start, units.end, units.pos1, units.pos2, strict=True)
        if not text[s:e].isspace()
    ]
    theirs = [
        (w.surface, w.feature.pos1, w.feature.pos2 if w.feature.pos2 != "*" else "")
        for w in _tagger()(text)
        if not w.surface.isspace()
    ]
    assert ours == theirs


_TAGGER: list[object] = []


def _tagger() -> fugashi.Tagger:  # type: ignore[name-defined]  # noqa: F821
    import fugashi

    if not _TAGGER:
        _TAGGER.append(fugashi.Tagger())
    return _TAGGER[0]  # type: ignore[return-value]


def test_qwen35_is_default_and_cached() -> None:
    """``tokenlens tokens`` defaults to Qwen3.5 (its parser and its config), and a
    vocabulary is loaded once per name whatever its case or alias."""
    import argparse

    from tokenlens.cli import tokens as tokens_cli
    from tokenlens.text.study import TokensConfig

    parser = argparse.ArgumentParser()
    tokens_cli.register(parser.add_subparsers())
    args = parser.parse_args(["tokens", "--corpus", "demo", "--out", "o"])
    assert args.tokenizer == TokensConfig(corpus=Path("c.jsonl")).tokenizer == "qwen3.5"
    default = load_tokenizer(args.tokenizer)
    assert default is load_tokenizer("Qwen3.5") is load_tokenizer(" qwen3.6 ")
    assert default.name == "qwen3.5" and default.size == 248_044 + 33
    assert default is not load_tokenizer("qwen2.5")


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    reqs=st.lists(
        st.tuples(
            text_strategy(), st.sampled_from(["ja", "en"]), st.integers(0, 3), st.integers(0, 3)
        ),
        max_size=5,
    )
)
def test_batched_requests_equal_single_requests(
    vocab: Vocabulary, reqs: list[tuple[str, str, int, int]]
) -> None:
    """classify_requests gives each request exactly the rows classify_tokens gives it,
    also when a request starts or ends in the middle of a character."""
    from tokenlens.text.classify import classify_requests

    requests = []
    for text, lang, head, tail in reqs:
        ids = vocab.encode(text)
        # Drop tokens at either end so requests may start/end inside a character.
        ids = ids[head : len(ids) - tail] if len(ids) > head + tail else []
        requests.append((ids, lang))
    batched = classify_requests(requests, vocab)
    for r, (ids, lang) in enumerate(requests):
        single = classify_tokens(ids, vocab, lang)
        mine = batched.filter(pa.compute.equal(batched.column("request_index"), r))
        assert mine.drop_columns(["request_index"]).to_pylist() == single.to_pylist()
