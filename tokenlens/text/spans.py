"""Token byte spans and character spans that tile the decoded text exactly.

The decoded text is the concatenation of the tokens' raw bytes, decoded as UTF-8 the
way Python's ``errors="replace"`` does it (each maximal invalid subsequence becomes one
U+FFFD). That is also what a detokenizer prints, and it is defined for every id
sequence: a generation may stop in the middle of a character or emit bytes that never
form one.

Byte spans tile the raw bytes with no gap or overlap. Character spans are derived from
them: a token covers the characters its first and last byte belong to, so a token that
holds only part of a character (a *byte fragment*) gets that whole character as its
span, and the next fragment of the same character shares it. Everything is computed
with numpy over the whole sequence at once: no per-token Python decoding.

For display, where every character must appear once, :func:`display_texts` gives each
token the characters whose first byte it holds: the texts tile the decoded text, and
the later fragments of a split character show nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenlens.arrays import I64
from tokenlens.arrays import Mask as B1

__all__ = ["Spans", "char_byte_offsets", "display_texts", "token_spans"]


@dataclass(frozen=True)
class Spans:
    """Where each token sits in the decoded text, in bytes and in characters.

    ``byte_char[b]`` is the index of the character byte ``b`` belongs to and
    ``char_byte[c]`` the first byte of character ``c`` (with one extra entry: the total
    byte length), so other layers can move between the two coordinate systems.
    ``fragment[i]`` is True when token ``i`` holds part of a character: it starts or
    ends inside a multi-byte character, or holds bytes that never form a valid one.
    """

    data: bytes
    text: str
    byte_start: I64
    byte_end: I64
    char_start: I64
    char_end: I64
    fragment: B1
    byte_char: I64
    char_byte: I64
    invalid: B1  # per byte: part of an invalid (U+FFFD) sequence

    def __len__(self) -> int:
        return len(self.byte_start)


def _decode_replace(data: bytes) -> tuple[str, list[tuple[int, int]]]:
    """``data.decode("utf-8", "replace")`` plus the byte ranges that were replaced.

    Decoding strictly and restarting after each error reproduces CPython's replace
    handler exactly (it is called with the same maximal invalid ranges), and the ranges
    are what maps each U+FFFD back to the bytes it stands for.
    """
    parts: list[str] = []
    bad: list[tuple[int, int]] = []
    pos = 0
    view = memoryview(data)
    while True:
        try:
            parts.append(bytes(view[pos:]).decode("utf-8"))
            break
        except UnicodeDecodeError as exc:
            parts.append(bytes(view[pos : pos + exc.start]).decode("utf-8"))
            parts.append("\ufffd")
            bad.append((pos + exc.start, pos + exc.end))
            pos += exc.end
    return "".join(parts), bad


def token_spans(pieces: Sequence[bytes], lengths: I64 | None = None) -> Spans:
    """Byte and character spans of tokens given their raw bytes (see module doc).

    ``lengths`` (the byte length of each piece) may be passed when already known.
    """
    data = b"".join(pieces)
    n_bytes = len(data)
    if lengths is None:
        lengths = np.fromiter((len(p) for p in pieces), dtype=np.int64, count=len(pieces))
    byte_end = np.cumsum(lengths, dtype=np.int64)
    byte_start = byte_end - lengths
    arr = np.frombuffer(data, dtype=np.uint8)
    invalid = np.zeros(n_bytes, dtype=np.bool_)
    try:
        text = data.decode("utf-8")
        is_start = (arr & 0xC0) != 0x80
    except UnicodeDecodeError:
        text, bad = _decode_replace(data)
        is_start = (arr & 0xC0) != 0x80
        for s, e in bad:
            invalid[s:e] = True
            is_start[s] = True
            is_start[s + 1 : e] = False
    byte_char = np.cumsum(is_start, dtype=np.int64) - 1
    char_byte = np.append(np.flatnonzero(is_start).astype(np.int64), np.int64(n_bytes))
    n_chars = len(text)
    if len(char_byte) - 1 != n_chars:  # pragma: no cover - would be a decoding bug
        raise AssertionError("character count mismatch while aligning tokens")

    nonempty = lengths > 0
    # For a zero-length token (undefined id) use the character at its position.
    pos = np.minimum(byte_start, max(n_bytes - 1, 0))
    char_start = np.where(byte_start < n_bytes, byte_char[pos] if n_bytes else 0, n_chars)
    last = np.clip(byte_end - 1, 0, max(n_bytes - 1, 0))
    char_end = np.where(nonempty, (byte_char[last] + 1) if n_bytes else 0, char_start)
    char_start = np.asarray(char_start, dtype=np.int64)
    char_end = np.asarray(char_end, dtype=np.int64)

    # A token is a fragment if it starts or ends inside a character or holds bytes
    # of an invalid sequence.
    starts_inside = np.zeros(len(pieces), dtype=np.bool_)
    ends_inside = np.zeros(len(pieces), dtype=np.bool_)
    if n_bytes:
        in_range = byte_start < n_bytes
        starts_inside[in_range] = ~is_start[byte_start[in_range]]
        mid = byte_end < n_bytes
        ends_inside[mid] = ~is_start[byte_end[mid]]
    inv_cum = np.concatenate(([0], np.cumsum(invalid, dtype=np.int64)))
    has_invalid = (inv_cum[byte_end] - inv_cum[byte_start]) > 0
    fragment = nonempty & (starts_inside | ends_inside | has_invalid)
    return Spans(
        data=data,
        text=text,
        byte_start=byte_start,
        byte_end=byte_end,
        char_start=char_start,
        char_end=char_end,
        fragment=fragment,
        byte_char=byte_char,
        char_byte=char_byte,
        invalid=invalid,
    )


def display_texts(spans: Spans) -> list[str]:
    """The text each token shows when the tokens are printed one by one.

    Every character of ``spans.text`` goes to the token holding its first byte, so a
    character split over byte fragments (a kanji, an emoji) appears once, on its first
    fragment, and the other fragments show ``""``; an invalid byte sequence is one
    U+FFFD, on the token holding its first byte. The texts concatenate to
    ``spans.text`` exactly, and a token that is not a fragment shows its own bytes.
    """
    # The first character starting at or after each token's first / end byte.
    lo = np.searchsorted(spans.char_byte, spans.byte_start, side="left").tolist()
    hi = np.searchsorted(spans.char_byte, spans.byte_end, side="left").tolist()
    text = spans.text
    return [text[a:b] for a, b in zip(lo, hi, strict=True)]


def char_byte_offsets(text: str) -> I64:
    """First UTF-8 byte of each character of ``text``, plus the total byte length.

    Used to move MeCab's byte offsets and regex character offsets between systems
    without re-encoding substrings.
    """
    cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    widths = 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)
    out = np.zeros(len(cps) + 1, dtype=np.int64)
    np.cumsum(widths, out=out[1:])
    return out
