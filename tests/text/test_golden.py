"""Golden tables, checked by hand against the MeCab analysis shown in each comment.

Columns: token text, script, transition, pos, pos2, is_particle, particle_fused,
boundary, morph_initial. The token split itself is a fact of the vocabulary (Qwen3.5
unless said otherwise); the classes are what these tests pin down. Each case lists
MeCab's morphemes so the boundary of every token can be checked by eye.
"""

from __future__ import annotations

import pytest

from tokenlens.text.classify import classify_tokens
from tokenlens.text.tokenizers import load_tokenizer

Row = tuple[str, str, str, str, str, bool, bool, str, bool]

CASES: list[tuple[str, str, str, list[Row]]] = [
    (
        # Morphemes: 私 | は | 東京 | に | 行き | ます | 。
        "qwen3.5",
        "ja",
        "私は東京に行きます。",
        [
            # pronoun + topic particle in one token: two whole morphemes -> spans; pos
            # is the first morpheme's (代名詞; UniDic gives it no pos2); it carries a
            # particle fused with a content word.
            ("私は", "mixed", "kanji>hiragana", "代名詞", "", True, True, "spans", True),
            ("東京", "kanji", "", "名詞", "固有名詞", False, False, "same", True),
            # particle に + first character of 行き: ends inside a morpheme -> crosses.
            ("に行", "mixed", "hiragana>kanji", "助詞", "格助詞", True, True, "crosses", True),
            # rest of 行き + ます: starts inside a morpheme -> crosses, not word-initial;
            # pos is that of 行き (the morpheme holding the first byte). UniDic tags
            # 行く as 非自立可能 (it can be an auxiliary verb).
            ("きます", "hiragana", "", "動詞", "非自立可能", False, False, "crosses", False),
            ("。", "punct", "", "補助記号", "句点", False, False, "same", True),
        ],
    ),
    (
        # 個人 | 情報 | の | 保護 | を | 導入 | が | 必要 | です | 。
        "qwen3.5",
        "ja",
        "個人情報の保護を導入が必要です。",
        [
            # Qwen3.5 fuses noun + noun + particle: three whole morphemes -> spans.
            (
                "個人情報の",
                "mixed",
                "kanji>hiragana",
                "名詞",
                "普通名詞",
                True,
                True,
                "spans",
                True,
            ),
            ("保護", "kanji", "", "名詞", "普通名詞", False, False, "same", True),
            # Particle first, then the noun: pos is 助詞 (the token commits to it first).
            ("を導入", "mixed", "hiragana>kanji", "助詞", "格助詞", True, True, "spans", True),
            (
                "が必要です",
                "mixed",
                "hiragana>kanji>hiragana",
                "助詞",
                "格助詞",
                True,
                True,
                "spans",
                True,
            ),
            ("。", "punct", "", "補助記号", "句点", False, False, "same", True),
        ],
    ),
    (
        # Same sentence, Qwen2.5: particles mostly stand alone, 導入 is split in two.
        "qwen2.5",
        "ja",
        "個人情報の保護を導入が必要です。",
        [
            ("個人", "kanji", "", "名詞", "普通名詞", False, False, "same", True),
            ("情報", "kanji", "", "名詞", "普通名詞", False, False, "same", True),
            ("の", "hiragana", "", "助詞", "格助詞", True, False, "same", True),
            ("保護", "kanji", "", "名詞", "普通名詞", False, False, "same", True),
            ("を", "hiragana", "", "助詞", "格助詞", True, False, "same", True),
            ("導", "kanji", "", "名詞", "普通名詞", False, False, "inside", True),
            ("入", "kanji", "", "名詞", "普通名詞", False, False, "inside", False),
            ("が必要", "mixed", "hiragana>kanji", "助詞", "格助詞", True, True, "spans", True),
            # です is an auxiliary (助動詞), not a particle.
            ("です", "hiragana", "", "助動詞", "", False, False, "same", True),
            ("。", "punct", "", "補助記号", "句点", False, False, "same", True),
        ],
    ),
    (
        # Okurigana. 手紙 | を | 書き | まし | た
        "qwen3.5",
        "ja",
        "手紙を書きました",
        [
            ("手", "kanji", "", "名詞", "普通名詞", False, False, "inside", True),
            ("紙", "kanji", "", "名詞", "普通名詞", False, False, "inside", False),
            # The verb stem's kanji goes with the particle, its okurigana with the
            # auxiliaries: both tokens cross the 書き morpheme.
            ("を書", "mixed", "hiragana>kanji", "助詞", "格助詞", True, True, "crosses", True),
            ("きました", "hiragana", "", "動詞", "一般", False, False, "crosses", False),
        ],
    ),
    (
        # Katakana loanword, number + Latin unit. コンピューター | の | メモリ | を | 3 | GB |
        # 増やし | た | 。
        "qwen3.5",
        "ja",
        "コンピューターのメモリを3GB増やした。",
        [
            # ー is a weak character: it joins the katakana around it (not "mixed").
            ("コンピュー", "katakana", "", "名詞", "普通名詞", False, False, "inside", True),
            # End of the loanword + particle: starts inside -> crosses; the transition
            # skips ー and reads katakana>hiragana.
            (
                "ターの",
                "mixed",
                "katakana>hiragana",
                "名詞",
                "普通名詞",
                True,
                True,
                "crosses",
                False,
            ),
            ("メモリ", "katakana", "", "名詞", "普通名詞", False, False, "same", True),
            ("を", "hiragana", "", "助詞", "格助詞", True, False, "same", True),
            ("3", "digit", "", "名詞", "数詞", False, False, "same", True),
            ("GB", "latin", "", "名詞", "普通名詞", False, False, "same", True),
            # Okurigana split off the kanji: 増 | や | した against 増やし | た.
            ("増", "kanji", "", "動詞", "一般", False, False, "inside", True),
            ("や", "hiragana", "", "動詞", "一般", False, False, "inside", False),
            ("した", "hiragana", "", "動詞", "一般", False, False, "crosses", False),
            ("。", "punct", "", "補助記号", "句点", False, False, "same", True),
        ],
    ),
    (
        # Number with separator and unit. 価格 | は | 1 | , | 200 | 円 | です | 。
        "qwen3.5",
        "ja",
        "価格は1,200円です。",
        [
            ("価格は", "mixed", "kanji>hiragana", "名詞", "普通名詞", True, True, "spans", True),
            ("1", "digit", "", "名詞", "数詞", False, False, "same", True),
            # MeCab tags the ASCII comma 記号 (symbol) while its script is punct (Po).
            (",", "punct", "", "記号", "一般", False, False, "same", True),
            # Qwen splits numbers into single digits; MeCab keeps 200 whole.
            ("2", "digit", "", "名詞", "数詞", False, False, "inside", True),
            ("0", "digit", "", "名詞", "数詞", False, False, "inside", False),
            ("0", "digit", "", "名詞", "数詞", False, False, "inside", False),
            ("円", "kanji", "", "名詞", "普通名詞", False, False, "same", True),
            ("です", "hiragana", "", "助動詞", "", False, False, "same", True),
            ("。", "punct", "", "補助記号", "句点", False, False, "same", True),
        ],
    ),
    (
        # Mixed Latin. GPU | で | Python | を | 動かす
        "qwen3.5",
        "ja",
        "GPUでPythonを動かす",
        [
            ("GPU", "latin", "", "名詞", "普通名詞", False, False, "same", True),
            ("で", "hiragana", "", "助詞", "格助詞", True, False, "same", True),
            ("Python", "latin", "", "名詞", "普通名詞", False, False, "same", True),
            ("を", "hiragana", "", "助詞", "格助詞", True, False, "same", True),
            ("動か", "mixed", "kanji>hiragana", "動詞", "一般", False, False, "inside", True),
            ("す", "hiragana", "", "動詞", "一般", False, False, "inside", False),
        ],
    ),
    (
        # CJK Extension B. 𠮷 (unknown to UniDic: 補助記号) | 野家
        "qwen3.5",
        "ja",
        "𠮷野家",
        [
            # Four single-byte tokens for one 4-byte character: each is a byte fragment
            # attached to 𠮷 (same char span 0-1); only the first starts the morpheme.
            ("\\xf0", "byte_fragment", "", "補助記号", "一般", False, False, "fragment", True),
            ("\\xa0", "byte_fragment", "", "補助記号", "一般", False, False, "fragment", False),
            ("\\xae", "byte_fragment", "", "補助記号", "一般", False, False, "fragment", False),
            ("\\xb7", "byte_fragment", "", "補助記号", "一般", False, False, "fragment", False),
            ("野", "kanji", "", "名詞", "固有名詞", False, False, "inside", True),
            ("家", "kanji", "", "名詞", "固有名詞", False, False, "inside", False),
        ],
    ),
    (
        # Qwen2.5: a token holding a whole ー plus two bytes of メ. ラーメン | 　 | を | 食べ | た
        "qwen2.5",
        "ja",
        "ラーメン\u3000を食べた",
        [
            ("ラ", "katakana", "", "名詞", "普通名詞", False, False, "inside", True),
            # Part of a character makes the whole token a fragment, even with ー in it.
            (
                "ー\\xe3\\x83",
                "byte_fragment",
                "",
                "名詞",
                "普通名詞",
                False,
                False,
                "fragment",
                False,
            ),
            ("\\xa1", "byte_fragment", "", "名詞", "普通名詞", False, False, "fragment", False),
            ("ン", "katakana", "", "名詞", "普通名詞", False, False, "inside", False),
            # UniDic emits the ideographic space as a 空白 morpheme.
            ("\u3000", "space", "", "空白", "", False, False, "same", True),
            ("を", "hiragana", "", "助詞", "格助詞", True, False, "same", True),
            ("食べた", "mixed", "kanji>hiragana", "動詞", "一般", False, False, "spans", True),
        ],
    ),
    (
        "qwen3.5",
        "en",
        "The cat sat on the mat.",
        [
            ("The", "latin", "", "function", "det", True, False, "same", True),
            # The leading space is outside the word and ignored: " cat" is latin, same.
            (" cat", "latin", "", "content", "", False, False, "same", True),
            (" sat", "latin", "", "content", "", False, False, "same", True),
            (" on", "latin", "", "function", "adp", True, False, "same", True),
            (" the", "latin", "", "function", "det", True, False, "same", True),
            (" mat", "latin", "", "content", "", False, False, "same", True),
            (".", "punct", "", "punct", "", False, False, "same", True),
        ],
    ),
    (
        "qwen3.5",
        "en",
        "I don't know what it's for.",
        [
            ("I", "latin", "", "function", "pron", True, False, "same", True),
            # Clitics are their own words (as in the pre-tokenizer): don | 't.
            (" don", "latin", "", "content", "", False, False, "same", True),
            # The apostrophe is weak: 't is latin, not punct>latin.
            ("'t", "latin", "", "function", "part", True, False, "same", True),
            (" know", "latin", "", "content", "", False, False, "same", True),
            # "what" is listed under det first (it is also a pronoun).
            (" what", "latin", "", "function", "det", True, False, "same", True),
            (" it", "latin", "", "function", "pron", True, False, "same", True),
            ("'s", "latin", "", "function", "aux", True, False, "same", True),
            (" for", "latin", "", "function", "adp", True, False, "same", True),
            (".", "punct", "", "punct", "", False, False, "same", True),
        ],
    ),
    (
        "qwen3.5",
        "en",
        "It costs $1,200 per year.",
        [
            ("It", "latin", "", "function", "pron", True, False, "same", True),
            (" costs", "latin", "", "content", "", False, False, "same", True),
            (" $", "symbol", "", "symbol", "", False, False, "same", True),
            # "1,200" is one number word; the digit tokens and the comma sit inside it.
            ("1", "digit", "", "number", "", False, False, "inside", True),
            (",", "punct", "", "number", "", False, False, "inside", False),
            ("2", "digit", "", "number", "", False, False, "inside", False),
            ("0", "digit", "", "number", "", False, False, "inside", False),
            ("0", "digit", "", "number", "", False, False, "inside", False),
            (" per", "latin", "", "function", "adp", True, False, "same", True),
            (" year", "latin", "", "content", "", False, False, "same", True),
            (".", "punct", "", "punct", "", False, False, "same", True),
        ],
    ),
    (
        "qwen3.5",
        "en",
        "  Hello,   world!",
        [
            # A whitespace-only token inside a longer run of spaces: inside that run.
            (" ", "space", "", "space", "", False, False, "inside", True),
            (" Hello", "latin", "", "content", "", False, False, "same", True),
            (",", "punct", "", "punct", "", False, False, "same", True),
            ("  ", "space", "", "space", "", False, False, "inside", True),
            (" world", "latin", "", "content", "", False, False, "same", True),
            ("!", "punct", "", "punct", "", False, False, "same", True),
        ],
    ),
]

COLUMNS = (
    "token_text",
    "script",
    "transition",
    "pos",
    "pos2",
    "is_particle",
    "particle_fused",
    "boundary",
    "morph_initial",
)


@pytest.mark.parametrize(
    ("tokenizer", "lang", "text", "expected"), CASES, ids=[c[2][:12] for c in CASES]
)
def test_golden(tokenizer: str, lang: str, text: str, expected: list[Row]) -> None:
    vocab = load_tokenizer(tokenizer)
    table = classify_tokens(vocab.encode(text), vocab, lang)
    got = [tuple(row[c] for c in COLUMNS) for row in table.to_pylist()]
    assert got == expected
