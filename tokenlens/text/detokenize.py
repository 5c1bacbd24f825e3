"""Token ids to the text vLLM returns for them, and why a recorded text does not match.

vLLM's incremental detokenizer skips special tokens and holds back a character cut at
the end of the output; a salvaged run rebuilds ``output_text`` the same way
(:func:`decode_output`), and analyze refuses a run whose ids do not decode to its
recorded text (:func:`output_mismatch`: a wrong or relabelled tokenizer, an edited
text). ``vocab`` is a :class:`tokenlens.text.Vocabulary` (bytes per id, specials).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _complete_utf8(data: bytes) -> bytes:
    """``data`` without a trailing incomplete UTF-8 sequence (a cut multi-byte character)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # ASCII or a lead byte
            need = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
            return data[:-back] if byte >= 0xC0 and back < need else data
    return data


def decode_output(vocab: Any, ids: Sequence[int]) -> str:
    """The text vLLM's detokenizer gives for ``ids`` (``skip_special_tokens``, its default).

    Special tokens (end of turn, ...) print nothing; an incomplete UTF-8 sequence at the
    end (the output was cut inside a character) is held back, as vLLM's incremental
    detokenizer holds it; other invalid bytes become U+FFFD. ``-1`` (a hole in a
    salvaged output) contributes nothing.
    """
    kept = [int(i) for i in ids if i >= 0]
    special = vocab.is_special(kept) if kept else []
    data = b"".join(vocab.pieces([i for i, s in zip(kept, special, strict=True) if not s]))
    return _complete_utf8(data).decode("utf-8", "replace")


def _held_back(pieces: Sequence[bytes]) -> bytes:
    """The bytes of ``pieces`` without the trailing tokens that end in a cut character.

    vLLM's incremental detokenizer holds back every token since the last one after
    which the text was whole, not only the cut character's bytes: a last token that
    completes one character and starts the next (``"の"`` + a lead byte) prints
    nothing, so its whole character is missing from ``output_text`` too.
    """
    data = b"".join(pieces)
    end = len(pieces)
    while end > 0 and _complete_utf8(data) != data:
        end -= 1
        data = data[: len(data) - len(pieces[end])]
    return data


def output_mismatch(vocab: Any, ids: Sequence[int], text: str) -> str | None:
    """Why ``ids`` do not decode to ``text`` with ``vocab`` (None: they do).

    Tolerated: special tokens printed or not (vLLM prints the ones its tokenizer does
    not mark special), a cut character at the end shown as U+FFFD or not at all (or
    held back with the whole tokens it started in, as vLLM's detokenizer does), and
    one leading space (word-piece tokenizers drop the space that starts a sequence).
    """
    kept = [int(i) for i in ids if i >= 0]
    outside = [i for i in kept if i >= vocab.size]
    if outside:
        return f"token id {outside[0]} is outside the tokenizer's {vocab.size} ids"
    special = vocab.is_special(kept) if kept else []
    pieces = vocab.pieces([i for i, s in zip(kept, special, strict=True) if not s])
    data = b"".join(pieces)
    forms = {
        _complete_utf8(data).decode("utf-8", "replace"),
        data.decode("utf-8", "replace"),
        _held_back(pieces).decode("utf-8", "replace"),
    }
    forms |= {form[1:] for form in forms if form.startswith(" ")}
    seen = text
    for i in sorted({i for i, s in zip(kept, special, strict=True) if s}):
        literal = b"".join(vocab.pieces([i])).decode("utf-8", "replace")
        if literal:
            seen = seen.replace(literal, "")
    if seen in forms:
        return None
    expected = min(forms, key=len)
    at = next(
        (k for k, (a, b) in enumerate(zip(expected, seen, strict=False)) if a != b),
        min(len(expected), len(seen)),
    )
    return (
        f"they decode to {expected[max(0, at - 8) : at + 12]!r} but output_text has "
        f"{seen[max(0, at - 8) : at + 12]!r} (character {at})"
    )
