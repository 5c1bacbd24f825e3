"""Special tokens, odd ids, Hugging Face tokenizer.json, errors, spans edge cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tokenlens.errors import TokenlensError
from tokenlens.text import (
    classify_tokens,
    dictionary_identity,
    display_texts,
    load_tokenizer,
    token_spans,
)


def test_special_tokens_are_units_of_their_own() -> None:
    v = load_tokenizer("qwen3.5")
    think = 248044 + 24  # <think> in Qwen3.5's special list
    im_end = 248046
    ids = [think, *v.encode("\n考える"), im_end]
    rows = classify_tokens(ids, v, "ja").to_pylist()
    assert rows[0]["token_text"] == "<think>" and rows[-1]["token_text"] == "<|im_end|>"
    for r in (rows[0], rows[-1]):
        assert (r["script"], r["pos"], r["boundary"], r["is_special"], r["bpe_rank"]) == (
            "symbol",
            "special",
            "same",
            True,
            None,
        )
    # MeCab never sees the special strings: 考える is still a verb.
    assert [r["pos"] for r in rows[1:-1] if r["token_text"].strip()] == ["動詞"] * sum(
        1 for r in rows[1:-1] if r["token_text"].strip()
    )


def test_undefined_ids_are_zero_length_specials() -> None:
    v = load_tokenizer("qwen2.5")
    ids = [*v.encode("猫"), 151935, -1, *v.encode("犬")]  # padded-embedding id, garbage
    rows = classify_tokens(ids, v, "ja").to_pylist()
    mid = rows[len(v.encode("猫")) : len(v.encode("猫")) + 2]
    for r in mid:
        assert r["byte_start"] == r["byte_end"] and r["char_start"] == r["char_end"]
        assert (r["script"], r["pos"], r["is_special"]) == ("symbol", "special", True)


def test_truncated_and_invalid_bytes() -> None:
    # 漢 = e6 bc a2. Truncated at the end, then an invalid run in the middle.
    pieces = [b"a", b"\xe6\xbc", b"b", b"\x80\x80", b"\xe6", b"\xbc\xa2"]
    sp = token_spans(pieces)
    assert sp.text == "a\ufffdb\ufffd\ufffd漢"
    assert sp.fragment.tolist() == [False, True, False, True, True, True]
    assert sp.char_start.tolist() == [0, 1, 2, 3, 5, 5]
    assert sp.char_end.tolist() == [1, 2, 3, 5, 6, 6]
    end = token_spans([b"x", b"\xf0\x9f"])  # generation stopped inside an emoji
    assert end.text == "x\ufffd" and end.fragment.tolist() == [False, True]


def test_display_puts_a_split_character_on_its_first_fragment() -> None:
    kanji = "咲".encode()  # e5 92 b2
    assert display_texts(token_spans([b"a", kanji[:2], kanji[2:], b"b"])) == ["a", "咲", "", "b"]
    assert display_texts(token_spans([kanji[:1], kanji[1:] + b"x"])) == ["咲", "x"]
    emoji = "😀".encode()  # four bytes, one token each
    pieces = [b"hi ", *(emoji[i : i + 1] for i in range(4)), b"!"]
    assert display_texts(token_spans(pieces)) == ["hi ", "😀", "", "", "", "!"]
    assert display_texts(token_spans([b"", emoji, b""])) == ["", "😀", ""]  # undefined ids
    assert display_texts(token_spans([])) == []


def test_display_of_truncated_and_invalid_bytes() -> None:
    # The same pieces as above: each U+FFFD sits on the token holding its first byte.
    pieces = [b"a", b"\xe6\xbc", b"b", b"\x80\x80", b"\xe6", b"\xbc\xa2"]
    assert display_texts(token_spans(pieces)) == ["a", "\ufffd", "b", "\ufffd\ufffd", "漢", ""]
    end = token_spans([b"x", b"\xf0", b"\x9f"])  # generation stopped inside an emoji
    assert display_texts(end) == ["x", "\ufffd", ""]
    assert display_texts(token_spans([b"a", b"\x80"])) == ["a", "\ufffd"]  # a stray byte


def test_bad_tokenizer_name_is_one_line_error() -> None:
    with pytest.raises(TokenlensError) as info:
        load_tokenizer("qwen9.9")
    msg = str(info.value)
    assert "\n" not in msg and "qwen9.9" in msg and "qwen3.5" in msg


def test_dictionary_identity_names_unidic() -> None:
    ident = dictionary_identity()
    assert "unidic-lite 1.0.8" in ident and "UniDic 2.1.2" in ident and "sha256:" in ident


def _byte_level_alphabet() -> dict[int, str]:
    """Byte -> character of the byte-level BPE alphabet, as Hugging Face's ``tokenizers``
    maps it (an oracle independent of tokenlens): every byte that occurs in UTF-8 text
    is read back from the ByteLevel pre-tokenizer, one sample character per lead byte;
    the 13 bytes that never occur in UTF-8 (C0, C1, F5-FF) are printable Latin-1, which
    GPT-2's table keeps as themselves, and the alphabet must still have them free."""
    from tokenizers import pre_tokenizers

    level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    samples = [chr(c) for c in range(0x800)]  # 1 and 2 bytes: every lead and continuation
    # Three bytes: U+0800, U+1000, ..., U+F000 (lead bytes E0-EF; U+D000 is no surrogate).
    samples += [chr(max(0x800, (lead - 0xE0) << 12)) for lead in range(0xE0, 0xF0)]
    samples += [chr(c) for c in (0x10000, 0x40000, 0x80000, 0xC0000, 0x100000)]  # F0-F4
    table: dict[int, str] = {}
    for sample in samples:
        ((mapped, _),) = level.pre_tokenize_str(sample)
        table.update(zip(sample.encode("utf-8"), mapped, strict=True))
    never_in_utf8 = [0xC0, 0xC1, *range(0xF5, 0x100)]
    assert sorted(set(range(256)) - set(table)) == never_in_utf8
    alphabet = set(pre_tokenizers.ByteLevel.alphabet())
    assert set(table.values()) <= alphabet
    table.update({b: chr(b) for b in never_in_utf8})
    assert set(table.values()) == alphabet and len(set(table.values())) == 256
    return table


def _qwen_as_tokenizer_json(tmp_path: Path) -> Path:
    """Qwen2.5's vocabulary written in the byte-level alphabet, as tokenizer.json has it."""
    v = load_tokenizer("qwen2.5")
    enc = _byte_level_alphabet()
    vocab = {
        "".join(enc[x] for x in tok): i
        for i, tok in enumerate(v.token_bytes)
        if tok and not v.special_mask[i]
    }
    spec = {
        "version": "1.0",
        "added_tokens": [
            {
                "id": i,
                "content": v.token_bytes[i].decode(),
                "special": True,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
            }
            for i in np.flatnonzero(v.special_mask).tolist()
            if v.token_bytes[i]
        ],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": True,
        },
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": True,
        },
        "model": {
            "type": "BPE",
            "vocab": vocab,
            "merges": [],
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
        },
    }
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def test_hf_byte_level_vocab_maps_to_exact_bytes(tmp_path: Path) -> None:
    """Every id of a byte-level tokenizer.json gives the same bytes as tiktoken's table."""
    path = _qwen_as_tokenizer_json(tmp_path)
    hf = load_tokenizer(str(tmp_path))  # a directory works too
    ref = load_tokenizer("qwen2.5")
    assert hf.token_bytes == ref.token_bytes
    assert (hf.special_mask == ref.special_mask).all()
    assert load_tokenizer(str(path)) is hf  # cached per file


def test_hf_trained_tokenizer_end_to_end(tmp_path: Path) -> None:
    """A small byte-level BPE trained here: encode -> spans -> classes, fragments included."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<|endoftext|>"],
    )
    tok.train_from_iterator(["私は東京に行きます。", "The cat sat on the mat."] * 20, trainer)
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    v = load_tokenizer(str(path))
    text = "私は京都に行った。The mat <|endoftext|>"
    ids = v.encode(text)
    assert b"".join(v.pieces(ids)).decode() == text  # exact bytes, special string kept as text
    rows = classify_tokens(ids, v, "ja").to_pylist()
    assert any(r["script"] == "byte_fragment" for r in rows)  # 京都 is unseen: byte tokens
    assert tok.decode(ids) == text
    # merges give ranks: the alphabet first, merged tokens after
    ranks = [r["bpe_rank"] for r in rows if r["bpe_rank"] is not None]
    assert ranks and min(ranks) >= 0


def test_unsupported_tokenizer_json_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(TokenlensError) as info:
        load_tokenizer(str(bad))
    assert "\n" not in str(info.value)
