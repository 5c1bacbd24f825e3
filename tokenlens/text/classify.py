"""Per-token classes: script, part of speech, particle, boundary, transition, rank.

:func:`classify_tokens` is the one entry point for the analysis stage: given a
request's ``output_token_ids``, the tokenizer and the language, it returns one row per
token (schema :data:`TOKEN_SCHEMA`). The text is parsed by MeCab once per call and
every per-token quantity is computed with numpy over the whole sequence, so the cost
is MeCab's plus a small constant per token (see ``benchmarks/bench_align.py``).

Rules (docs/text.md explains the why):

- ``script``: one of :data:`SCRIPTS`. A token holding part of a character is
  ``byte_fragment``; a special token (``<|im_end|>``) or an id the vocabulary does not
  define is ``symbol``; otherwise the strong class of its characters, ``mixed`` when it
  has several (see :mod:`tokenlens.text.charclass` for weak and space characters).
- ``boundary``: the token against morphemes (Japanese) or words, whitespace at the
  token's edges ignored. ``fragment``: part of one character. ``same``: exactly one
  unit. ``inside``: strictly inside one unit. ``spans``: several whole units.
  ``crosses``: starts or ends inside a unit and reaches into another.
- ``pos``/``pos2``: of the unit where the token's first non-space byte lies (the
  token commits to that word first). ``is_particle``: the token overlaps a particle
  (助詞) or, for English, a function word. ``particle_fused``: it also overlaps a
  non-particle word (を導入, 情報の).
- ``transition``: the strong classes inside a ``mixed`` token in order, e.g.
  ``kanji>hiragana`` (okurigana) or ``hiragana>kanji`` (particle + noun).
- ``bpe_rank``: merge rank of the token, null for special tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tokenlens.text.charclass import CLASS_NAMES, SPACE, STANDALONE, STRONG, char_classes
from tokenlens.text.morph import SPECIAL_POS, Units, segment
from tokenlens.text.spans import Spans, token_spans
from tokenlens.text.tokenizers import IdSeq, Vocabulary, load_tokenizer

__all__ = [
    "BOUNDARIES",
    "CLASS_COLUMNS",
    "SCRIPTS",
    "TOKEN_SCHEMA",
    "classify_requests",
    "classify_tokens",
]

# The per-character classes (hiragana ... space), then the two token-level ones. Every
# code below is looked up by name: reordering or inserting a name labels no token wrong.
SCRIPTS = (*CLASS_NAMES[: SPACE + 1], "mixed", "byte_fragment")
_SYMBOL = SCRIPTS.index("symbol")
_SPACE_S = SCRIPTS.index("space")
_MIXED = SCRIPTS.index("mixed")
_FRAGMENT = SCRIPTS.index("byte_fragment")
# Script code of each character class's standalone name (weak classes: STANDALONE's).
_SCRIPT_OF_CLASS = np.array(
    [SCRIPTS.index(CLASS_NAMES[int(c)]) for c in STANDALONE], dtype=np.int16
)
BOUNDARIES = ("same", "inside", "spans", "crosses", "fragment")
_SAME = BOUNDARIES.index("same")
_INSIDE = BOUNDARIES.index("inside")
_SPANS = BOUNDARIES.index("spans")
_CROSSES = BOUNDARIES.index("crosses")
_FRAG_B = BOUNDARIES.index("fragment")

# The class columns, each computed below in ``_classify_joined`` (its classifier). The
# analysis joins every one of them (``tokenlens.analysis.join``); how it reports them
# is the token-class table (``tokenlens.analysis.token_classes``).
_CLASS_FIELDS = (
    pa.field("script", pa.string(), nullable=False),
    pa.field("transition", pa.string(), nullable=False),
    pa.field("pos", pa.string(), nullable=False),
    pa.field("pos2", pa.string(), nullable=False),
    pa.field("is_particle", pa.bool_(), nullable=False),
    pa.field("particle_fused", pa.bool_(), nullable=False),
    pa.field("boundary", pa.string(), nullable=False),
    pa.field("morph_initial", pa.bool_(), nullable=False),
    pa.field("is_special", pa.bool_(), nullable=False),
    pa.field("bpe_rank", pa.int64(), nullable=True),
)
CLASS_COLUMNS = tuple(f.name for f in _CLASS_FIELDS)

TOKEN_SCHEMA = pa.schema(
    [
        pa.field("token_index", pa.int64(), nullable=False),
        pa.field("token_id", pa.int64(), nullable=False),
        pa.field("token_text", pa.string(), nullable=False),
        pa.field("byte_start", pa.int64(), nullable=False),
        pa.field("byte_end", pa.int64(), nullable=False),
        pa.field("char_start", pa.int64(), nullable=False),
        pa.field("char_end", pa.int64(), nullable=False),
        *_CLASS_FIELDS,
    ]
)


_STRONG_LO = np.where(STRONG, np.arange(len(STRONG)), 255).astype(np.int16)
_STRONG_HI = np.where(STRONG, np.arange(len(STRONG)), -1).astype(np.int16)
_WEAK = ~STRONG & (np.arange(len(STRONG)) != SPACE)
# STANDALONE is uint8: widen it before -1 meets it (numpy >= 2.5 refuses a Python int a
# uint8 array cannot hold, NEP 50, instead of silently promoting).
_STANDALONE = STANDALONE.astype(np.int16)
_WEAK_LO = np.where(_WEAK, _STANDALONE, np.int16(255))
_WEAK_HI = np.where(_WEAK, _STANDALONE, np.int16(-1))


# Requests classified together are joined by one newline byte that belongs to none of
# them. A newline is ASCII, so it never completes or continues a character: every
# request decodes exactly as it would alone. It is cut out as a unit of its own, so
# MeCab parses every request separately and whitespace runs never merge across it.
_SEP = b"\n"


def classify_tokens(token_ids: IdSeq, tokenizer: Vocabulary | str, lang: str) -> pa.Table:
    """One row per token of ``token_ids`` with spans and classes (:data:`TOKEN_SCHEMA`).

    ``tokenizer`` is a :class:`Vocabulary` or anything :func:`load_tokenizer` accepts
    (``"qwen3.5"``, a tokenizer.json path). ``lang`` selects MeCab (``ja``) or word
    splitting (anything else). Offsets refer to the decoded text: the tokens' bytes
    concatenated, decoded as UTF-8 with invalid sequences replaced (see
    :mod:`tokenlens.text.spans`). Never raises on odd input.
    """
    vocab = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    return _classify_joined(
        [np.asarray(token_ids, dtype=np.int64).reshape(-1)], vocab, lang
    ).drop_columns(["request_index"])


def classify_requests(
    requests: Sequence[tuple[IdSeq, str]], tokenizer: Vocabulary | str
) -> pa.Table:
    """Many ``(token_ids, lang)`` requests at once: ``request_index`` + :data:`TOKEN_SCHEMA`.

    The same rows as :func:`classify_tokens` on each request (offsets per request),
    several times faster on many short requests: the fixed cost of a call (a few
    hundred numpy/Arrow operations) is paid once per language, not once per request.
    Rows come in request order.
    """
    vocab = load_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    by_lang: dict[str, list[int]] = {}
    for i, (_, lang) in enumerate(requests):
        by_lang.setdefault(lang, []).append(i)
    tables = []
    for lang, idx in by_lang.items():
        ids = [np.asarray(requests[i][0], dtype=np.int64).reshape(-1) for i in idx]
        t = _classify_joined(ids, vocab, lang)
        mapping = np.asarray(idx, dtype=np.int64)
        req = mapping[t.column("request_index").to_numpy()]
        tables.append(t.set_column(0, "request_index", pa.array(req)))
    if not tables:
        return _classify_joined([], vocab, "en")
    out = pa.concat_tables(tables)
    if len(tables) > 1:
        out = out.sort_by([("request_index", "ascending"), ("token_index", "ascending")])
    return out


def _classify_joined(
    requests: list[npt.NDArray[np.int64]], vocab: Vocabulary, lang: str
) -> pa.Table:
    """Classify requests of one language joined by :data:`_SEP`, then split them again."""
    sizes = np.array([len(r) for r in requests], dtype=np.int64)
    pieces: list[bytes] = []
    lengths: list[npt.NDArray[np.int64]] = []
    special_parts: list[npt.NDArray[np.bool_]] = []
    sep_len = np.array([len(_SEP)], dtype=np.int64)
    for k, ids in enumerate(requests):
        if k:
            pieces.append(_SEP)
            lengths.append(sep_len)
            special_parts.append(np.ones(1, dtype=np.bool_))
        pieces.extend(vocab.pieces(ids))
        lengths.append(vocab.lengths(ids))
        special_parts.append(vocab.is_special(ids))
    all_len = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    special = np.concatenate(special_parts) if special_parts else np.zeros(0, dtype=np.bool_)
    spans = token_spans(pieces, all_len)
    nonempty = spans.byte_end > spans.byte_start
    special_spans = [
        (int(spans.char_start[i]), int(spans.char_end[i]))
        for i in np.flatnonzero(special & nonempty & ~spans.fragment)
    ]
    units = segment(spans.text, lang, specials=special_spans)
    script, transition = _scripts(spans, special)
    rel = _relations(spans, units)

    # Rows of real tokens: drop the separators, rebase offsets to each request.
    n_req = len(requests)
    sep_rows = np.cumsum(sizes + 1)[:-1] - 1 if n_req > 1 else np.zeros(0, dtype=np.int64)
    keep = np.ones(len(pieces), dtype=np.bool_)
    keep[sep_rows] = False
    request_index = np.repeat(np.arange(n_req, dtype=np.int64), sizes)
    byte_base = np.concatenate(([0], spans.byte_end[sep_rows])) if n_req else np.zeros(0, np.int64)
    char_base = np.concatenate(([0], spans.char_end[sep_rows])) if n_req else np.zeros(0, np.int64)
    token_index = np.arange(len(request_index), dtype=np.int64) - np.repeat(
        np.concatenate(([0], np.cumsum(sizes)[:-1])) if n_req else np.zeros(0, np.int64), sizes
    )
    ids_all = np.concatenate(requests) if n_req else np.zeros(0, dtype=np.int64)
    ranks = vocab.ranks(ids_all)
    kb, kc = byte_base[request_index], char_base[request_index]
    columns: dict[str, pa.Array] = {
        "request_index": pa.array(request_index),
        "token_index": pa.array(token_index),
        "token_id": pa.array(ids_all),
        "token_text": pa.array(vocab.texts(ids_all).tolist(), pa.string()),
        "byte_start": pa.array(spans.byte_start[keep] - kb),
        "byte_end": pa.array(spans.byte_end[keep] - kb),
        "char_start": pa.array(spans.char_start[keep] - kc),
        "char_end": pa.array(spans.char_end[keep] - kc),
        "script": _names(script[keep], SCRIPTS),
        "transition": pa.array(
            [t for t, k in zip(transition, keep.tolist(), strict=True) if k], pa.string()
        ),
        "pos": rel.pos.filter(pa.array(keep)),
        "pos2": rel.pos2.filter(pa.array(keep)),
        "is_particle": pa.array(rel.is_particle[keep]),
        "particle_fused": pa.array(rel.particle_fused[keep]),
        "boundary": _names(rel.boundary[keep], BOUNDARIES),
        "morph_initial": pa.array(rel.morph_initial[keep]),
        "is_special": pa.array(special[keep]),
        "bpe_rank": pa.array(ranks, mask=ranks < 0),
    }
    schema = pa.schema([pa.field("request_index", pa.int64(), nullable=False), *TOKEN_SCHEMA])
    return pa.Table.from_pydict(columns, schema=schema)


def _names(codes: npt.NDArray[np.int8], names: Sequence[str]) -> pa.Array:
    dictionary = pa.DictionaryArray.from_arrays(
        pa.array(np.asarray(codes, dtype=np.int8)), pa.array(list(names), pa.string())
    )
    return dictionary.dictionary_decode()


def _scripts(
    spans: Spans, special: npt.NDArray[np.bool_]
) -> tuple[npt.NDArray[np.int8], list[str]]:
    """Script code per token and the class transitions inside mixed tokens."""
    n = len(spans)
    out = np.full(n, _SYMBOL, dtype=np.int8)
    transition = [""] * n
    lengths = spans.byte_end - spans.byte_start
    ne = np.flatnonzero(lengths > 0)
    if len(ne) == 0:
        return out, transition
    cls_char = char_classes(spans.text)
    cls_byte = cls_char[spans.byte_char]
    starts = spans.byte_start[ne]
    s_lo = np.minimum.reduceat(_STRONG_LO[cls_byte], starts)
    s_hi = np.maximum.reduceat(_STRONG_HI[cls_byte], starts)
    w_lo = np.minimum.reduceat(_WEAK_LO[cls_byte], starts)
    w_hi = np.maximum.reduceat(_WEAK_HI[cls_byte], starts)
    code = np.full(len(ne), _SPACE_S, dtype=np.int16)
    weak_only = (s_lo == 255) & (w_lo != 255)
    code[weak_only] = np.where(
        w_lo[weak_only] == w_hi[weak_only], _SCRIPT_OF_CLASS[w_lo[weak_only]], _MIXED
    )
    strong = s_lo != 255
    code[strong] = np.where(s_lo[strong] == s_hi[strong], _SCRIPT_OF_CLASS[s_lo[strong]], _MIXED)
    out[ne] = code.astype(np.int8)
    out[spans.fragment] = _FRAGMENT
    out[special] = _SYMBOL
    mixed = np.flatnonzero(out == _MIXED)
    if len(mixed):
        classes = cls_char.tolist()
        cs, ce = spans.char_start.tolist(), spans.char_end.tolist()
        for i in mixed.tolist():
            parts: list[str] = []
            prev = -1
            for c in classes[cs[i] : ce[i]]:
                if c < SPACE and c != prev:
                    parts.append(CLASS_NAMES[c])
                    prev = c
            transition[i] = ">".join(parts)
    return out, transition


@dataclass(frozen=True)
class _Relations:
    boundary: npt.NDArray[np.int8]
    pos: pa.Array
    pos2: pa.Array
    is_particle: npt.NDArray[np.bool_]
    particle_fused: npt.NDArray[np.bool_]
    morph_initial: npt.NDArray[np.bool_]


def _relations(spans: Spans, units: Units) -> _Relations:
    """Boundary, pos, particle flags and word-initial flag of each token."""
    n = len(spans)
    n_bytes = len(spans.data)
    # Units in raw-byte coordinates (they tile the bytes as tokens do).
    ub_s = spans.char_byte[units.start]
    ub_e = spans.char_byte[units.end]
    gap = np.repeat(units.is_space, ub_e - ub_s)
    idx = np.arange(n_bytes, dtype=np.int64)
    nxt = np.minimum.accumulate(np.where(gap, n_bytes, idx)[::-1])[::-1]
    prv = np.maximum.accumulate(np.where(gap, -1, idx))

    bs, be = spans.byte_start, spans.byte_end
    nonempty = be > bs
    safe_bs = np.minimum(bs, max(n_bytes - 1, 0))
    safe_last = np.clip(be - 1, 0, max(n_bytes - 1, 0))
    if n_bytes:
        a = np.where(nonempty, nxt[safe_bs], bs)
        has_core = nonempty & (a < be)
        b = np.where(has_core, prv[safe_last] + 1, be)
        a = np.where(has_core, a, bs)
    else:
        a, b = bs.copy(), be.copy()
    first = np.clip(np.searchsorted(ub_s, a, side="right") - 1, 0, max(len(ub_s) - 1, 0))
    last = np.clip(
        np.searchsorted(ub_s, np.maximum(b - 1, a), side="right") - 1, 0, max(len(ub_s) - 1, 0)
    )

    boundary = np.full(n, _CROSSES, dtype=np.int8)
    if len(ub_s):
        one = first == last
        starts_at = a == ub_s[first]
        same = one & starts_at & (b == ub_e[first])
        boundary[one & ~same] = _INSIDE
        boundary[same] = _SAME
        boundary[~one & starts_at & (b == ub_e[last])] = _SPANS
        morph_initial = starts_at & nonempty
    else:
        morph_initial = np.zeros(n, dtype=np.bool_)
    boundary[~nonempty] = _SAME
    boundary[spans.fragment] = _FRAG_B

    if len(ub_s):
        particle_cum = np.concatenate(([0], np.cumsum(units.is_particle, dtype=np.int64)))
        content_cum = np.concatenate(([0], np.cumsum(units.is_content, dtype=np.int64)))
        n_part = particle_cum[last + 1] - particle_cum[first]
        n_content = content_cum[last + 1] - content_cum[first]
        is_particle = (n_part > 0) & nonempty
        fused = is_particle & (n_content > 0)
        code = units.code[first]
        pos1_of = [p1 for p1, _ in units.labels]
        pos2_of = [p2 for _, p2 in units.labels]
        # Zero-length tokens (undefined ids) are not in the text: label them special.
        if not nonempty.all():
            pos1_of.append(SPECIAL_POS)
            pos2_of.append("")
            code = np.where(nonempty, code, len(units.labels))
        pos = pa.array(pos1_of, pa.string()).take(pa.array(code))
        pos2 = pa.array(pos2_of, pa.string()).take(pa.array(code))
    else:
        is_particle = np.zeros(n, dtype=np.bool_)
        fused = np.zeros(n, dtype=np.bool_)
        pos = pa.array([SPECIAL_POS] * n, pa.string())
        pos2 = pa.array([""] * n, pa.string())
    return _Relations(boundary, pos, pos2, is_particle, fused, morph_initial)
