"""Real text for the test bed: Qwen2.5 token ids of the project's JA/EN corpora.

Every simulated output is a window of real text, so the analysis classifies real
tokens (scripts, byte fragments, morphemes) and the target's simulated confidence can
depend on real token features. The text of one language is one *stream*: every
prompt of ``corpora/*.jsonl`` in that language, tokenised with the ``qwen2.5``
vocabulary and concatenated in pair order (so the JA and EN streams run in parallel,
document for document). Per token the stream keeps the features the confidence
process reads (:data:`FEATURES`):

- ``fragment``: the token holds part of a character (byte-level BPE split);
- ``change``: its script differs from the previous token's (spaces ignored);
- ``initial``: it starts a MeCab morpheme (Japanese) or a word (English);
- ``log_rank``: log(1 + BPE merge rank), a frequency proxy;
- ``punct``: it is punctuation.

A window may start only where a token starts a character (``can_start``), so a
window's text decodes cleanly and classifies the same as inside the stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tokenlens.arrays import F64, I64
from tokenlens.arrays import Mask as B

TOKENIZER = "qwen2.5"
LANGS = ("ja", "en")
CORPORA = Path(__file__).resolve().parent.parent.parent / "corpora"


@dataclass(frozen=True)
class Stream:
    """One language's text: token ids, script names and features, one entry per token."""

    lang: str
    ids: I64
    script: npt.NDArray[np.object_]
    features: dict[str, F64]
    can_start: B

    def __len__(self) -> int:
        return len(self.ids)

    def score(self, weights: dict[str, float]) -> F64:
        """The deterministic part of the target's confidence logit: sum of weight x feature."""
        out = np.zeros(len(self.ids))
        for name, w in weights.items():
            out += w * self.features[name]
        return out


@lru_cache(maxsize=2)
def streams(corpora: Path = CORPORA) -> dict[str, Stream]:
    """The JA and EN streams of every prompt under ``corpora`` (cached per process)."""
    from tokenlens.prompts import read_prompts
    from tokenlens.text import classify_requests, load_tokenizer
    from tokenlens.text.study import prompt_text

    vocab = load_tokenizer(TOKENIZER)
    docs: dict[str, list[tuple[str, I64]]] = {lang: [] for lang in LANGS}
    for path in sorted(corpora.glob("*.jsonl")):
        for p in read_prompts(path):
            if p.lang in docs:
                key = f"{path.stem}/{p.pair or p.id}"
                ids = np.asarray(vocab.encode(prompt_text(p)), dtype=np.int64)
                docs[p.lang].append((key, ids))
    out = {}
    for lang in LANGS:
        ordered = [ids for _, ids in sorted(docs[lang], key=lambda d: d[0]) if len(ids)]
        table = classify_requests([(ids, lang) for ids in ordered], vocab)
        script = np.asarray(table.column("script").to_pylist(), dtype=object)
        req = table.column("request_index").to_numpy()
        first = np.r_[True, req[1:] != req[:-1]]
        char_start = table.column("char_start").to_numpy()
        char_end = table.column("char_end").to_numpy()
        prev_end = np.r_[0, char_end[:-1]]
        can_start = first | (char_start >= prev_end)
        prev_script = np.r_[script[:1], script[:-1]]
        spaced = (script == "space") | (prev_script == "space")
        change = ~first & (script != prev_script) & ~spaced
        rank = np.asarray(table.column("bpe_rank").fill_null(0).to_numpy(), dtype=np.float64)
        features = {
            "fragment": (script == "byte_fragment").astype(np.float64),
            "change": change.astype(np.float64),
            "initial": table.column("morph_initial").to_numpy(zero_copy_only=False).astype(float),
            "log_rank": np.log1p(rank),
            "punct": (script == "punct").astype(np.float64),
        }
        out[lang] = Stream(
            lang=lang,
            ids=np.concatenate(ordered),
            script=script,
            features=features,
            can_start=can_start,
        )
    return out


def rank_matched(own: F64, reference: F64) -> F64:
    """Each value of ``own`` replaced by the ``reference`` value at the same quantile.

    The result has ``reference``'s distribution and ``own``'s order: Japanese text
    scored as if it were exactly as predictable as English, token for token in the
    same order of difficulty. Ties share their mid-rank.
    """
    sorted_own = np.sort(own)
    lo = np.searchsorted(sorted_own, own, side="left")
    hi = np.searchsorted(sorted_own, own, side="right") - 1
    quantile = ((lo + hi) / 2 + 0.5) / len(own)
    return np.asarray(np.quantile(reference, np.clip(quantile, 0.0, 1.0)), dtype=np.float64)
