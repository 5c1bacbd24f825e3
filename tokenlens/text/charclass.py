"""One class per Unicode code point, as a lookup table.

Classes come in three strengths, which decide how a token made of several characters
gets its single ``script``:

- *strong*: hiragana, katakana, kanji, latin, digit, punct, symbol, other. A token's
  script is its strong class if it has one, ``mixed`` if it has several.
- *weak*: characters that belong to their neighbours rather than to a script of their
  own: the prolonged sound mark ー (used in katakana and hiragana words alike),
  combining marks (é as e + U+0301, dakuten U+3099), zero-width joiners and variation
  selectors inside emoji sequences, other format characters, and the apostrophe
  (' and ’, inside English words: don't, it's). They are ignored next to strong
  characters; a token of weak characters only takes their standalone class
  (ー -> katakana, apostrophe -> punct, the rest -> symbol).
- *space*: whitespace, ignored next to anything else (byte-level BPE glues a leading
  space to the following word; ``" the"`` is latin, not mixed).

The table is built once from ``unicodedata`` plus explicit CJK ranges (so CJK
Extension B-H ideographs are kanji even where Python's Unicode database predates them).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import numpy as np
import numpy.typing as npt

__all__ = [
    "CLASS_NAMES",
    "SPACE",
    "STANDALONE",
    "STRONG",
    "char_classes",
    "class_table",
]

# Class codes (uint8). Order matters only for names.
HIRAGANA, KATAKANA, KANJI, LATIN, DIGIT, PUNCT, SYMBOL, OTHER = range(8)
SPACE = 8
WEAK_PROLONG = 9  # ー ｰ: standalone katakana
WEAK_MARK = 10  # combining marks, ZWJ, variation selectors, format chars: standalone symbol
WEAK_APOS = 11  # ' and ’ inside English words (don't, 's): standalone punct

CLASS_NAMES = (
    "hiragana",
    "katakana",
    "kanji",
    "latin",
    "digit",
    "punct",
    "symbol",
    "other",
    "space",
    "katakana",
    "symbol",
    "punct",
)
STRONG = np.array([c < SPACE for c in range(12)], dtype=np.bool_)
# Class a weak/space character takes when a token has nothing stronger.
STANDALONE = np.array([*range(8), SPACE, KATAKANA, SYMBOL, PUNCT], dtype=np.uint8)

_CJK_RANGES = (
    (0x3400, 0x4DBF),  # Extension A
    (0x4E00, 0x9FFF),  # URO
    (0xF900, 0xFAFF),  # compatibility ideographs
    (0x20000, 0x323AF),  # Extensions B-H (planes 2 and 3)
    (0x2F800, 0x2FA1F),  # compatibility supplement
)
_KANJI_EXTRA = {0x3005, 0x3006, 0x3007, 0x303B}  # 々 〆 〇 〻
_PROLONG = {0x30FC, 0xFF70}  # ー ｰ
_APOSTROPHE = {0x27, 0x2019}  # ' ’


def _classify(cp: int) -> int:
    """The class of one code point (see module doc)."""
    ch = chr(cp)
    if cp in _PROLONG:
        return WEAK_PROLONG
    if cp in _APOSTROPHE:
        return WEAK_APOS
    if ch.isspace():
        return SPACE
    cat = unicodedata.category(ch)
    if cat in ("Mn", "Mc", "Me", "Cf"):
        return WEAK_MARK
    if cp in _KANJI_EXTRA:
        return KANJI
    if cat == "Nd":
        return DIGIT
    if cat[0] == "P":
        return PUNCT
    if cat[0] == "L":
        name = unicodedata.name(ch, "")
        if "HIRAGANA" in name:
            return HIRAGANA
        if "KATAKANA" in name:
            return KATAKANA
        if name.startswith(("LATIN", "FULLWIDTH LATIN")):
            return LATIN
        return OTHER
    # Sm Sc Sk So, No Nl, Cc (non-space controls), Co, Cn, Cs, Zs handled above.
    return SYMBOL


@lru_cache(maxsize=1)
def class_table() -> npt.NDArray[np.uint8]:
    """Class code for every code point 0..0x10FFFF (built once, ~0.5 s)."""
    table = np.full(0x110000, SYMBOL, dtype=np.uint8)
    # Planes 4-13 are unassigned and 15-16 private use: both stay "symbol".
    for lo, hi in ((0, 0xD7FF), (0xE000, 0x3FFFF), (0xE0000, 0xE0FFF)):
        table[lo : hi + 1] = [_classify(cp) for cp in range(lo, hi + 1)]
    for lo, hi in _CJK_RANGES:
        table[lo : hi + 1] = KANJI
    return table


def char_classes(text: str) -> npt.NDArray[np.uint8]:
    """Class code of each character of ``text``."""
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return class_table()[cps]
