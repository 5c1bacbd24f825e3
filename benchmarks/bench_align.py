"""Alignment + classification throughput against the floor of fugashi parsing alone.

Builds >= 1M characters of mixed text (Japanese prose with particles, okurigana,
katakana loanwords and numbers; English; code; emoji, CJK Extension B, halfwidth and
fullwidth forms), split into request-sized texts, tokenises them with Qwen3.5 (not
timed: the analysis stage gets token ids), then times

- floor: ``fugashi.Tagger()`` parsing every text, reading surface + pos1 + pos2 of each
  node (what any aligner must at least do), and the bare parse (nodes only);
- ours: :func:`tokenlens.text.classify_tokens` on every text's ids (spans, MeCab or
  word split, all classes, the Arrow table), one call per text; and
  :func:`tokenlens.text.classify_requests` on all texts at once (what ``tokens`` and
  the analysis stage use).

Run: ``PYTHONPATH=. python benchmarks/bench_align.py [--chars 1000000] [--repeat 3]``.
The goal is ours <= 2x the floor.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

JA = [
    "個人情報の保護を導入が必要です。",
    "私は昨日、東京駅の近くでラーメンを三杯食べました。",
    "このコンピューターのメモリを16GBから32GBに増やしたところ、処理速度が約1.5倍になった。",
    "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。",
    "価格は1,200円（税込）で、送料は無料となっております。",
    "GPUでPythonのスクリプトを動かすには、CUDAのバージョンを確認してください。",
    "彼女は静かに窓を開け、遠くの山々を眺めながら深いため息をついた。",
    "𠮷野家の牛丼は安くて美味しいと評判だ。",
    "ｶﾀｶﾅの半角表記は古いシステムで今も使われている。",
    "ＡＢＣ株式会社は２０２４年に新しいサービスを開始しました。",
    "投機的デコーディングでは、小さなモデルが候補トークンを提案し、大きなモデルが検証する。",
    "今日はいい天気ですね😊　散歩に行きましょう！",
]
EN = [
    "Speculative decoding lets a small draft model propose tokens that the target verifies.",
    "I don't know what it's for, but it costs $1,200 per year.",
    "The quick brown fox jumps over the lazy dog while the cat sleeps on the mat.",
    "In March 2024, the team released version 3.5 with a new tokenizer and better throughput.",
    "Please explain the code below and suggest how to make it faster. 👨\u200d👩\u200d👧",
]
CODE = [
    "def f(x: int) -> int:\n    return x ** 2  # square\n",
    "for (let i = 0; i < n; i++) { total += arr[i]; }\n",
    "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name;\n",
]


def build_corpus(n_chars: int, seed: int = 0) -> list[tuple[str, str]]:
    """(lang, text) pairs of ~300-900 characters each, >= ``n_chars`` in total."""
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    total = 0
    while total < n_chars:
        r = rng.random()
        lang, pool = ("ja", JA) if r < 0.6 else ("en", EN) if r < 0.9 else ("en", CODE)
        target = rng.randint(300, 900)
        parts: list[str] = []
        size = 0
        while size < target:
            s = rng.choice(pool)
            parts.append(s)
            size += len(s)
            if rng.random() < 0.2:
                parts.append("\n")
        text = "".join(parts)
        out.append((lang, text))
        total += len(text)
    return out


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--chars", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    import fugashi

    from tokenlens.text import classify_requests, classify_tokens, load_tokenizer
    from tokenlens.text.charclass import class_table
    from tokenlens.text.morph import segment

    corpus = build_corpus(args.chars)
    n_chars = sum(len(t) for _, t in corpus)
    n_ja = sum(len(t) for lang, t in corpus if lang == "ja")
    vocab = load_tokenizer("qwen3.5")
    t0 = time.perf_counter()
    encoded = [(lang, vocab.encode(text)) for lang, text in corpus]
    t_encode = time.perf_counter() - t0
    n_tokens = sum(len(ids) for _, ids in encoded)
    class_table()  # one-time table build (~0.5 s), not per-request work
    segment("準備", "ja")  # loads MeCab once (not per-request work)
    tagger = fugashi.Tagger()

    def floor_features() -> None:
        for _, text in corpus:
            for w in tagger(text):
                _ = (w.surface, w.feature.pos1, w.feature.pos2)

    def floor_bare() -> None:
        for _, text in corpus:
            tagger(text)

    def ours() -> None:
        for lang, ids in encoded:
            classify_tokens(ids, vocab, lang)

    def ours_batched() -> None:
        classify_requests([(ids, lang) for lang, ids in encoded], vocab)

    ja_texts = [(lang, t) for lang, t in corpus if lang == "ja"]
    ja_encoded = [(lang, ids) for lang, ids in encoded if lang == "ja"]

    def floor_ja() -> None:
        for _, text in ja_texts:
            for w in tagger(text):
                _ = (w.surface, w.feature.pos1, w.feature.pos2)

    def ours_ja() -> None:
        classify_requests([(ids, lang) for lang, ids in ja_encoded], vocab)

    t_floor = best_of(args.repeat, floor_features)
    t_bare = best_of(args.repeat, floor_bare)
    t_ours = best_of(args.repeat, ours)
    t_batch = best_of(args.repeat, ours_batched)
    t_floor_ja = best_of(args.repeat, floor_ja)
    t_ours_ja = best_of(args.repeat, ours_ja)

    def rate(t: float, n: int = n_chars) -> str:
        return f"{t:7.3f} s  {n / t / 1e6:6.2f} M chars/s"

    print(
        f"corpus: {len(corpus)} texts, {n_chars:,} chars ({n_ja:,} Japanese), "
        f"{n_tokens:,} Qwen3.5 tokens"
    )
    print(f"tokenise (tiktoken, not timed below):        {rate(t_encode)}")
    print(f"floor: fugashi parse + surface/pos1/pos2:   {rate(t_floor)}")
    print(f"floor: fugashi parse, nodes only:            {rate(t_bare)}")
    print(f"ours:  classify_tokens, one call per text:   {rate(t_ours)}")
    print(f"ours:  classify_requests, all texts at once: {rate(t_batch)}")
    print(f"ratio per-text / floor (features):           {t_ours / t_floor:5.2f}x")
    print(f"ratio batched  / floor (features):           {t_batch / t_floor:5.2f}x")
    print(f"ratio batched  / floor (nodes only):         {t_batch / t_bare:5.2f}x")
    print(
        f"Japanese only: floor {rate(t_floor_ja, n_ja)} | ours {rate(t_ours_ja, n_ja)} | "
        f"ratio {t_ours_ja / t_floor_ja:.2f}x (batched / features)"
    )


if __name__ == "__main__":
    main()
