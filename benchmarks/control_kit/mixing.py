"""Training sets at a set Japanese share, packed into fixed-length rows.

A training set of ``n`` answer tokens at share ``s`` takes exactly ``round(s * n)``
Japanese and ``n - round(s * n)`` English answer tokens, each from the front of its
language's pool, in the pool's order (the drafters differ only in the mix; the last
example taken is cut to the exact count). Loss falls on answer tokens only, so a
row's loss positions are the positions whose *next* token is an answer token of the
same example; sequences are packed with position ids restarting at 0 per example (the
model masks attention between them: transformers builds a block-causal mask from the
position ids when no attention mask is given).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Example:
    """One prompt and the target's answer to it, as token ids."""

    lang: str
    prompt_ids: tuple[int, ...]
    answer_ids: tuple[int, ...]


@dataclass(frozen=True)
class Packed:
    """Rows of ``seq_len`` tokens: ids, position ids, loss mask (True where the next
    token is an answer token), and the language of each loss position's example
    (``"ja"``/``"en"``/``""``)."""

    input_ids: np.ndarray
    position_ids: np.ndarray
    loss_mask: np.ndarray
    loss_lang: np.ndarray

    def tokens(self, lang: str | None = None) -> int:
        if lang is None:
            return int(self.loss_mask.sum())
        return int((self.loss_mask & (self.loss_lang == lang)).sum())


def load_pools(path: Path) -> dict[str, list[Example]]:
    """The generation file's examples per language, in file order (empty answers left out)."""
    pools: dict[str, list[Example]] = {"ja": [], "en": []}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line:
            continue
        row = json.loads(line)
        if row["answer_ids"]:
            pools.setdefault(row["lang"], []).append(
                Example(row["lang"], tuple(row["prompt_ids"]), tuple(row["answer_ids"]))
            )
    return pools


def pool_tokens(pool: list[Example]) -> int:
    return sum(len(e.answer_ids) for e in pool)


def take(pool: list[Example], quota: int) -> list[Example]:
    """Examples from the front of ``pool`` with exactly ``quota`` answer tokens."""
    out: list[Example] = []
    left = quota
    for ex in pool:
        if left <= 0:
            break
        if len(ex.answer_ids) > left:
            ex = Example(ex.lang, ex.prompt_ids, ex.answer_ids[:left])
        out.append(ex)
        left -= len(ex.answer_ids)
    if left > 0:
        raise ValueError(f"the pool holds {quota - left} answer tokens, fewer than {quota}")
    return out


def split(share: float, n_tokens: int) -> tuple[int, int]:
    """(Japanese, English) answer tokens of a set of ``n_tokens`` at ``share``."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share {share} is not in [0, 1]")
    ja = round(share * n_tokens)
    return ja, n_tokens - ja


def mix(pools: dict[str, list[Example]], share: float, n_tokens: int, seed: int) -> list[Example]:
    """The training set at ``share``: exact token split; the two languages interleaved at
    random (``seed``), each language's examples kept in its pool's order."""
    ja, en = split(share, n_tokens)
    parts = {"ja": take(pools["ja"], ja), "en": take(pools["en"], en)}
    order = ["ja"] * len(parts["ja"]) + ["en"] * len(parts["en"])
    random.Random(seed).shuffle(order)
    queues = {lang: iter(examples) for lang, examples in parts.items()}
    return [next(queues[lang]) for lang in order]


def pack(examples: list[Example], seq_len: int, pad_id: int) -> Packed:
    """Pack ``examples`` in order into rows of ``seq_len`` (a new row when one does not fit)."""
    rows: list[list[Example]] = [[]]
    used = 0
    for ex in examples:
        n = len(ex.prompt_ids) + len(ex.answer_ids)
        if n > seq_len:
            raise ValueError(f"an example of {n} tokens does not fit a row of {seq_len}")
        if used + n > seq_len:
            rows.append([])
            used = 0
        rows[-1].append(ex)
        used += n
    shape = (len(rows), seq_len)
    ids = np.full(shape, pad_id, dtype=np.int64)
    pos = np.zeros(shape, dtype=np.int64)
    mask = np.zeros(shape, dtype=bool)
    langs = np.full(shape, "", dtype="<U2")
    for r, row in enumerate(rows):
        at = 0
        for ex in row:
            toks = ex.prompt_ids + ex.answer_ids
            n = len(toks)
            ids[r, at : at + n] = toks
            pos[r, at : at + n] = np.arange(n)
            # position t predicts token t + 1: the answer's tokens are predicted from
            # the prompt's last position up to the answer's second-to-last.
            first = at + len(ex.prompt_ids) - 1
            mask[r, first : at + n - 1] = True
            langs[r, first : at + n - 1] = ex.lang
            at += n
        pos[r, at:] = np.arange(seq_len - at)  # padding: a segment of its own, no loss
    return Packed(ids, pos, mask, langs)
