"""The token-class table: every class column the analysis splits acceptance by, once.

Contract: :data:`TOKEN_CLASSES` holds one :class:`TokenClass` per column of the joined
frame that classes judged rows (``script``, ``boundary``, buckets, ...), in the order of
the per-language breakdowns of summary.json. Every site reads it: the breakdowns
(:mod:`.breakdown`), the declared contrasts (:mod:`.classes`), the exploratory search
(:mod:`.explore`), the gap's decomposition (:mod:`.summarize`, :mod:`.decompose`), the
like-for-like flag (:mod:`.comparable`), tables.md, FINDINGS and the charts
(:mod:`tokenlens.report`). A new class column is one entry here plus the code that
computes it: a column of ``tokenlens.text.classify.TOKEN_SCHEMA`` (its classifier) or
one :mod:`.join` derives (``source="join"``).

Orders that were published before this table existed stay as published: the declared
families keep the order they were declared in (``declared``: the place, 1 first) and
the decomposition its order (``decomposed``); a test checks both are 1..n.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "TOKEN_CLASSES",
    "TokenClass",
    "charted",
    "class_entry",
    "class_label",
    "declared",
    "decomposed",
    "explored",
]

_NONE: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class TokenClass:
    """One class column: where it comes from, its words, and which analyses read it."""

    column: str  # column of the joined frame
    label: str  # words for tables, FINDINGS and chart titles ("Acceptance by <label>")
    source: str  # "classify" (tokens.parquet), "join" (derived there) or "step" (draft position)
    breakdown: str | None = None  # per-language section of summary.json (by_*), if any
    axis: str | None = None  # x-axis words; the report charts the breakdown when set
    declared: int | None = None  # place among the declared families of comparisons
    explored: bool = False  # searched by the exploratory class differences
    decomposed: int | None = None  # place in the gap's decomposition (summary ``gap``)
    per_language: Mapping[str, str] = field(default_factory=lambda: _NONE)
    """``{class: what each language puts there}``: classes whose tokens differ in kind
    across languages, shown per language and never contrasted (:mod:`.comparable`)."""


TOKEN_CLASSES: tuple[TokenClass, ...] = (
    TokenClass(
        "script",
        "script",
        "classify",
        breakdown="by_script",
        axis="script of the emitted token",
        declared=1,
        explored=True,
        decomposed=1,
        per_language=MappingProxyType(
            {
                "mixed": "English mixed-script tokens are code identifiers (.id, _id, "
                "(path), Japanese ones kanji+kana words (向け, 以下の, 的な)",
                "latin": "Latin tokens in Japanese output are code and English terms inside "
                "Japanese text (AI, python,  retries), in English output the prose "
                "itself ( the,  and,  a)",
            }
        ),
    ),
    TokenClass(
        "pos",
        "part of speech",
        "classify",
        breakdown="by_pos",
        axis="part of speech (UniDic pos1 / word class)",
        declared=3,
        explored=True,
    ),
    TokenClass(
        "particle_type",
        "particle type",
        "join",
        breakdown="by_particle",
        axis="particle type",
        declared=2,
        explored=True,
        decomposed=3,
    ),
    TokenClass(
        "boundary",
        "morpheme boundary",
        "classify",
        breakdown="by_boundary",
        axis="token against morpheme boundaries",
        declared=4,
        explored=True,
        decomposed=2,
        per_language=MappingProxyType(
            {
                "spans": "English tokens over several words are mostly Markdown and code "
                "punctuation ( **, **:, ###, fences), Japanese tokens over several "
                "morphemes multi-morpheme words (します, してください, により)",
                "crosses": "English tokens across a word boundary are code fragments (-t, "
                ".pref, _re), Japanese ones pieces of verb and particle chains "
                "(ることができます, 日に, 内の)",
            }
        ),
    ),
    TokenClass(
        "transition", "script transition", "classify", breakdown="by_transition", explored=True
    ),
    TokenClass("morph_initial", "word-initial", "classify", breakdown="by_word_initial"),
    TokenClass("output_bucket", "output position", "join", breakdown="by_output_position"),
    TokenClass(
        "rank_bucket",
        "BPE rank",
        "join",
        breakdown="by_bpe_rank",
        axis="BPE rank of the emitted token",
        explored=True,
        decomposed=4,
    ),
    TokenClass(
        "bytes_bucket",
        "token byte length",
        "join",
        breakdown="by_byte_length",
        axis="UTF-8 bytes of the emitted token",
    ),
    TokenClass(
        "conf_bucket",
        "the target's confidence",
        "join",
        breakdown="by_confidence",
        axis="target top-1 probability",
    ),
    TokenClass(
        "draft_target_rank", "draft token's rank in the target", "join", breakdown="by_draft_rank"
    ),
    TokenClass("position", "draft position (conditional: judged rows at p)", "step", declared=5),
)

_BY_COLUMN = {c.column: c for c in TOKEN_CLASSES}


def class_entry(column: str) -> TokenClass:
    """The entry of ``column`` (KeyError for a column the table does not know)."""
    return _BY_COLUMN[column]


def class_label(column: str) -> str:
    """The words for ``column`` (the column's own name when the table does not know it)."""
    entry = _BY_COLUMN.get(column)
    return column if entry is None else entry.label


def _placed(attr: str) -> tuple[TokenClass, ...]:
    placed = [c for c in TOKEN_CLASSES if getattr(c, attr) is not None]
    return tuple(sorted(placed, key=lambda c: getattr(c, attr)))


def declared() -> tuple[str, ...]:
    """The declared families' columns, in the order they were declared."""
    return tuple(c.column for c in _placed("declared"))


def decomposed() -> tuple[str, ...]:
    """The columns the gap's decomposition splits by, in its order."""
    return tuple(c.column for c in _placed("decomposed"))


def explored() -> tuple[str, ...]:
    """The columns the exploratory search looks through, in table order."""
    return tuple(c.column for c in TOKEN_CLASSES if c.explored)


def charted() -> tuple[TokenClass, ...]:
    """The breakdowns the report charts, in table order."""
    return tuple(c for c in TOKEN_CLASSES if c.axis is not None and c.breakdown is not None)
