"""Morphemes (Japanese, MeCab + UniDic) and words (space-delimited languages).

:func:`segment` returns :class:`Units` that tile the text exactly (skipped whitespace
becomes whitespace units), each with a part of speech: MeCab through fugashi with
unidic-lite for Japanese, a regular expression and a closed set of function words
otherwise. How and why (byte offsets, the NUL and chunk limits): docs/text.md.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import regex

from tokenlens.arrays import I64
from tokenlens.errors import TokenlensError
from tokenlens.prompts import normalise_lang
from tokenlens.text.charclass import SPACE, char_classes
from tokenlens.text.spans import char_byte_offsets

__all__ = [
    "FUNCTION_WORDS",
    "Units",
    "dictionary_identity",
    "is_japanese",
    "segment",
]


PARTICLE_POS1 = "助詞"
SPACE_POS_JA = "空白"
SPACE_POS_EN = "space"
SPECIAL_POS = "special"
_MECAB_CHUNK_CHARS = 20_000


@dataclass(frozen=True)
class Units:
    """Morphemes or words as character spans that tile ``[0, len(text))``.

    ``code`` indexes ``labels`` (``(pos1, pos2)`` pairs; code 0 is whitespace): UniDic's
    first two levels for Japanese; for English ``pos1`` in ``function``, ``content``,
    ``number``, ``punct``, ``symbol``, ``space`` and ``pos2`` the function-word class;
    special tokens have ``pos1 == "special"``. ``is_space`` marks whitespace units.
    """

    start: I64
    end: I64
    code: I64
    labels: tuple[tuple[str, str], ...]
    is_particle: npt.NDArray[np.bool_]
    is_space: npt.NDArray[np.bool_]
    is_content: npt.NDArray[np.bool_]  # neither particle, space nor special

    def __len__(self) -> int:
        return len(self.start)

    @property
    def pos1(self) -> list[str]:
        """``pos1`` of every unit (convenience; the classifier uses ``code``)."""
        return [self.labels[c][0] for c in self.code.tolist()]

    @property
    def pos2(self) -> list[str]:
        """``pos2`` of every unit."""
        return [self.labels[c][1] for c in self.code.tolist()]


def is_japanese(lang: str) -> bool:
    """True for ``ja`` and its regional tags (``ja-JP``, ``JA``: :func:`normalise_lang`)."""
    return normalise_lang(lang) == "ja"


# --------------------------------------------------------------------------- MeCab


def _dicdir() -> Path:
    try:
        import unidic_lite
    except ImportError:  # pragma: no cover - depends on install
        raise TokenlensError("Japanese morphology needs the package unidic-lite") from None
    return Path(unidic_lite.DICDIR)


@lru_cache(maxsize=1)
def _tagger() -> Any:
    """One MeCab instance printing ``start end pos1,pos2`` per morpheme (byte offsets)."""
    try:
        import fugashi
    except ImportError:  # pragma: no cover - depends on install
        raise TokenlensError("Japanese morphology needs the package fugashi") from None
    fmt = r"%ps %pe %f[0],%f[1]\n"
    args = f'-r /dev/null -d "{_dicdir()}" -O "" -F "{fmt}" -U "{fmt}" -E "" -B ""'
    return fugashi.GenericTagger(args)


@lru_cache(maxsize=1)
def dictionary_identity() -> str:
    """``"unidic-lite V / UniDic V / fugashi V / sha256:…"`` of the MeCab dictionary, for
    signatures; the hash covers the small files and ``sys.dic``'s first MiB and size."""
    d = _dicdir()
    h = hashlib.sha256()
    for name in ("dicrc", "char.bin", "unk.dic"):
        h.update((d / name).read_bytes())
    sysdic = d / "sys.dic"
    with sysdic.open("rb") as fh:
        h.update(fh.read(1 << 20))
    h.update(str(sysdic.stat().st_size).encode())
    version = (
        (d / "version").read_text(encoding="utf-8").strip() if (d / "version").exists() else "?"
    )
    parts = [
        f"unidic-lite {_dist_version('unidic-lite')}",
        f"UniDic {version}",
        f"fugashi {_dist_version('fugashi')}",
        f"sha256:{h.hexdigest()[:16]}",
    ]
    return " / ".join(parts)


def _dist_version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:  # pragma: no cover
        return "unknown"


def _chunks(text: str) -> list[tuple[int, str]]:
    """``text`` as (char offset, piece) of at most ``_MECAB_CHUNK_CHARS``, cut after a
    newline, else after a space or 。, else at the limit."""
    out: list[tuple[int, str]] = []
    pos, n = 0, len(text)
    while n - pos > _MECAB_CHUNK_CHARS:
        limit = pos + _MECAB_CHUNK_CHARS
        cut = text.rfind("\n", pos, limit)
        if cut < 0:
            cut = max(text.rfind(" ", pos, limit), text.rfind("。", pos, limit))
        cut = limit if cut < 0 else cut + 1
        out.append((pos, text[pos:cut]))
        pos = cut
    out.append((pos, text[pos:]))
    return out


def _mecab_morphemes(text: str) -> tuple[I64, I64, list[str]]:
    """Character spans and ``pos1,pos2`` keys of MeCab morphemes (whitespace skipped)."""
    tagger = _tagger()
    starts: list[I64] = []
    ends: list[I64] = []
    keys: list[str] = []
    for offset, piece in _chunks(text):
        if not piece:
            continue
        out: str = tagger.parse(piece.replace("\x00", "\x01"))
        fields = out.split()
        if not fields:
            continue
        b2c = _byte_to_char(piece)
        # " ".join + fromstring parses the offsets in C (10x faster than int() each).
        starts.append(b2c[np.fromstring(" ".join(fields[0::3]), dtype=np.int64, sep=" ")] + offset)
        ends.append(b2c[np.fromstring(" ".join(fields[1::3]), dtype=np.int64, sep=" ")] + offset)
        keys.extend(fields[2::3])
    return _cat(starts), _cat(ends), keys


def _cat(parts: list[I64]) -> I64:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _byte_to_char(text: str) -> I64:
    """Map a UTF-8 byte offset (character starts and the end) to a character index."""
    cb = char_byte_offsets(text)
    out = np.zeros(int(cb[-1]) + 1, dtype=np.int64)
    out[cb] = np.arange(len(cb), dtype=np.int64)
    return out


# ------------------------------------------------------------------------- English

# Closed-class words: the counterpart of particles for space-delimited text.
_FUNCTION_CLASSES: dict[str, str] = {
    "det": "a an the this that these those some any no every each either neither all "
    "both another such what which whose my your his her its our their",
    "adp": "of in on at by for with about against between into through during before "
    "after above below to from up down out off over under again across along among "
    "around behind beside beyond despite except inside near onto outside per since "
    "than toward towards upon via within without like unlike",
    "conj": "and or but nor so yet if because although though while whereas unless "
    "until whether as once that",
    "pron": "i me you he him she it we us they them myself yourself himself herself "
    "itself ourselves themselves who whom mine yours hers ours theirs one",
    "aux": "be am is are was were been being have has had having do does did will "
    "would shall should can could may might must 'll 're 've 'm 'd 's",
    "part": "not n't 't there here",
}
FUNCTION_WORDS: dict[str, str] = {}
for _cls, _words in _FUNCTION_CLASSES.items():
    for _w in _words.split():
        FUNCTION_WORDS.setdefault(_w, _cls)

_EN_WORD_KEY = {w: f"function,{c}" for w, c in FUNCTION_WORDS.items()}
_EN_WORD_KEY.update({w.replace("'", "’"): k for w, k in _EN_WORD_KEY.items() if "'" in w})

# One alternative per kind of word; the pattern matches every character, so the
# matches tile the text and their offsets follow from their lengths alone (findall
# returns plain strings, several times faster than match objects).
_WORD_RE = regex.compile(
    r"\s+"
    r"|(?i:'s|'t|'re|'ve|'m|'ll|'d|’s|’t|’re|’ve|’m|’ll|’d)(?![\p{L}\p{M}])"  # clitics
    r"|\p{Nd}+(?:[.,]\p{Nd}+)*"  # numbers: 3, 1,200, 3.14
    r"|\p{L}[\p{L}\p{M}\p{Nd}]*"  # words (with combining marks, digits inside: x86)
    r"|\p{P}"  # one punctuation mark
    r"|\X",  # anything else: one grapheme cluster (emoji ZWJ sequence, stray mark)
    regex.VERSION1,
)
# The kind of a non-function match follows from the class of its first character.
_KIND_BY_CLASS = np.array(
    [
        "content,",  # hiragana
        "content,",  # katakana
        "content,",  # kanji
        "content,",  # latin
        "number,",  # digit
        "punct,",  # punct
        "symbol,",  # symbol
        "content,",  # other letters
        "",  # space: dropped
        "content,",  # ー
        "symbol,",  # stray combining mark / format character
        "punct,",  # lone apostrophe
    ],
    dtype=object,
)


def _english_units(text: str) -> tuple[I64, I64, list[str]]:
    """Words, numbers, clitics, punctuation and other clusters (whitespace excluded)."""
    parts: list[str] = _WORD_RE.findall(text)
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    first_class = char_classes(text)[starts] if len(parts) else np.zeros(0, np.uint8)
    keep = first_class != SPACE  # whitespace becomes gap units, like MeCab's
    kinds = _KIND_BY_CLASS[first_class[keep]].tolist()
    word_key = _EN_WORD_KEY
    kept = [p for p, k in zip(parts, keep.tolist(), strict=True) if k]
    keys = [word_key.get(p.lower(), kind) for p, kind in zip(kept, kinds, strict=True)]
    return starts[keep], ends[keep], keys


# ------------------------------------------------------------------------- segment


def segment(text: str, lang: str, specials: list[tuple[int, int]] | None = None) -> Units:
    """Units tiling ``text``: morphemes for Japanese (:func:`is_japanese`), words otherwise.

    ``specials`` (character spans of special tokens) are not parsed: one unit each with
    ``pos1 == "special"``.
    """
    japanese = is_japanese(lang)
    analyse = _mecab_morphemes if japanese else _english_units
    space_key = f"{SPACE_POS_JA if japanese else SPACE_POS_EN},"
    special_key = f"{SPECIAL_POS},"
    starts: list[I64] = []
    ends: list[I64] = []
    keys: list[str] = []
    pieces: list[tuple[int, int, bool]] = []  # (start, end, is_special)
    pos = 0
    for s, e in sorted(specials or []):
        if s < pos or e <= s:
            continue
        pieces.append((pos, s, False))
        pieces.append((s, e, True))
        pos = e
    pieces.append((pos, len(text), False))
    for s, e, special in pieces:
        if s >= e:
            continue
        if special:
            starts.append(np.array([s], dtype=np.int64))
            ends.append(np.array([e], dtype=np.int64))
            keys.append(special_key)
            continue
        us, ue, uk = analyse(text if (s, e) == (0, len(text)) else text[s:e])
        starts.append(us + s)
        ends.append(ue + s)
        keys.extend(uk)
    # Label codes local to this call: Arrow's dictionary encoding finds the few dozen
    # distinct keys in C; code 0 is reserved for whitespace gaps.
    encoded = pa.array(keys, pa.string()).dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64) + 1
    pairs = [
        (k.partition(",")[0], k.partition(",")[2])
        for k in [space_key, *encoded.dictionary.to_pylist()]
    ]
    labels = tuple((p1 or "*", p2 if p2 != "*" else "") for p1, p2 in pairs)
    particle_pos = PARTICLE_POS1 if japanese else "function"
    return _fill_gaps(text, _cat(starts), _cat(ends), codes, labels, particle_pos)


def _fill_gaps(
    text: str,
    s_arr: I64,
    e_arr: I64,
    c_arr: I64,
    labels: tuple[tuple[str, str], ...],
    particle_pos: str,
) -> Units:
    """:class:`Units` with a code-0 (whitespace) unit for every stretch nothing covers."""
    n = len(text)
    if len(s_arr) > 1 and not (s_arr[1:] >= e_arr[:-1]).all():
        # Out of order or overlapping (never seen from MeCab): sort, drop overlaps.
        order = np.argsort(s_arr, kind="stable")
        s_arr, e_arr, c_arr = s_arr[order], e_arr[order], c_arr[order]
        keep = np.ones(len(s_arr), dtype=np.bool_)
        keep[1:] = s_arr[1:] >= np.maximum.accumulate(e_arr)[:-1]
        s_arr, e_arr, c_arr = s_arr[keep], e_arr[keep], c_arr[keep]
    nonempty = e_arr > s_arr
    if not nonempty.all():
        s_arr, e_arr, c_arr = s_arr[nonempty], e_arr[nonempty], c_arr[nonempty]
    prev_end = np.concatenate(([0], e_arr))
    next_start = np.concatenate((s_arr, [n]))
    gap = next_start > prev_end
    if gap.any():
        gs, ge = prev_end[gap], next_start[gap]
        s_arr = np.concatenate((s_arr, gs))
        e_arr = np.concatenate((e_arr, ge))
        c_arr = np.concatenate((c_arr, np.zeros(len(gs), dtype=np.int64)))
        order = np.argsort(s_arr, kind="stable")
        s_arr, e_arr, c_arr = s_arr[order], e_arr[order], c_arr[order]
    # A unit counts as whitespace only if all its characters are (MeCab may skip, or
    # UniDic label 空白, something a regex would not call space: trust the text).
    non_space = np.concatenate(([0], np.cumsum(char_classes(text) != SPACE, dtype=np.int64)))
    space_label = np.array([p1 == labels[0][0] for p1, _ in labels], dtype=np.bool_)
    is_space = space_label[c_arr] & (non_space[e_arr] == non_space[s_arr])
    particle = np.array([p1 == particle_pos for p1, _ in labels], dtype=np.bool_)[c_arr]
    special = np.array([p1 == SPECIAL_POS for p1, _ in labels], dtype=np.bool_)[c_arr]
    content = ~particle & ~is_space & ~special
    return Units(
        start=s_arr.astype(np.int64, copy=False),
        end=e_arr.astype(np.int64, copy=False),
        code=c_arr.astype(np.int64, copy=False),
        labels=labels,
        is_particle=particle,
        is_space=is_space,
        is_content=content,
    )
