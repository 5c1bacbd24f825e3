"""Hypothesis strategies for the text-layer tests (a plain module: conftest cannot be imported)."""

from __future__ import annotations

from hypothesis import strategies as st

# Pieces that exercise every odd corner named in issue 4, mixed into arbitrary text.
ODD_PIECES = [
    "👨\u200d👩\u200d👧\u200d👦",  # emoji ZWJ family
    "👍🏻",  # emoji + skin-tone modifier
    "❤\ufe0f",  # variation selector
    "🇯🇵",  # regional indicators
    "e\u0301",  # combining acute
    "か\u3099",  # combining dakuten
    "ｶﾀｶﾅﾞ",  # halfwidth katakana with halfwidth voiced mark
    "𠮷野家",  # CJK Extension B
    "\U0002a6d6\U00030000",  # Ext B end, Ext G
    "ＡＢＣ１２３！",  # fullwidth Latin, digits, punct
    "\x00\x07\x1b[0m\x7f",  # control characters incl. NUL
    "def f(x):\n\treturn x ** 2  # コメント\n",  # code
    "個人情報の保護を導入が必要です。",
    "ラーメンを3杯食べた",
    "\u3000",  # ideographic space
    "\ufeff\u200b\u200c",  # BOM, zero-width space / non-joiner
    "\r\n\n  \t",
    "<|im_end|><think>",  # special-token strings inside plain text
    "don't it's",
    "①Ⅻ½²",
    "Ωмир한국어",
    "\U000f0000\ue000",  # private use
]


def text_strategy() -> st.SearchStrategy[str]:
    """Arbitrary Unicode (no surrogates) interleaved with the odd pieces above."""
    chars = st.characters(exclude_categories=["Cs"])
    piece = st.one_of(st.text(chars, max_size=12), st.sampled_from(ODD_PIECES))
    return st.lists(piece, max_size=8).map("".join)
