"""tables.md's acceptance by token byte length: per drafter family, judged positions,
Japanese beside English (summary.json → ``byte_length``).

Acceptance falls with the emitted token's byte length in both languages, and Japanese
tokens are shorter on average (a kana or kanji is 3 bytes), so the per-language rate
mixes the languages' length profiles; this table shows the rate at each length.
"""

from __future__ import annotations

from collections.abc import Callable

from tokenlens.analysis.summary_file import Summary
from tokenlens.analysis.wording import runs_phrase
from tokenlens.format import lang_order, rate_cell


def byte_length_lines(s: Summary, family_words: Callable[[str], str]) -> list[str]:
    """One table per family (named by ``family_words``): a row per byte-length bucket, a
    column per language."""
    if not s.byte_length:
        return []
    lines = [
        "## Acceptance by token byte length, per drafter family (judged positions)",
        "",
        "UTF-8 bytes of the token that came out at the position (a kana or kanji is 3 "
        "bytes); 95% prompt-pair intervals; `*` fewer than the minimum rows (sparse).",
        "",
    ]
    for name, fam in s.byte_length.items():
        langs = lang_order(fam.rates)
        groups = list(dict.fromkeys(g for lang in langs for g in fam.rates[lang]))
        lines += [
            f"### {family_words(name)} ({runs_phrase(fam.configurations)})",
            "",
            "| bytes | " + " | ".join(langs) + " |",
            "|---|" + "---|" * len(langs),
        ]
        for g in groups:
            cells = [rate_cell(fam.rates[lang].get(g), count=True) for lang in langs]
            lines.append(f"| {g} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines
