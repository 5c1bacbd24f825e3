"""results.md against a golden text written by hand from a small synthetic bench.

The synthetic results (:func:`synthetic_rows`) go through write_results/read_results
first, so the tables see what a real results.csv gives them. Two groups: wiki/short
has a baseline and two methods (ngram k=3, mtp k=2) in Japanese and English, in an
order where the baseline is not first; news/long lacks the English baseline, has
Chinese as a third language, and one case without per-position acceptance. The
bench report tests reuse the same rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tokenlens.bench.results import COLUMN_NAMES, Row, read_results, write_results
from tokenlens.bench.tables import FORMATS, MISSING, fmt, results_markdown, spread

BENCH: dict[str, Any] = {
    "signature": "tokenlens:0.1.0|vllm:0.32.0|plan:ja-en-speed@0123abcd",
    "tokenlens_version": "0.1.0",
    "vllm_version": "0.32.0",
    "plan": {"name": "ja-en speed", "description": "MTP vs n-gram on the embedded pair"},
    "plan_sha256": "0123abcd",
    "created_at": "2026-01-02T03:04:05Z",
    "server": None,
    "cases_total": 12,
    "cases_done": 11,
}

WIKI = {"dtype": "bfloat16", "quantization": None, "corpus": "wiki", "length": "short"}
NEWS = {"dtype": "float16", "quantization": "awq", "corpus": "news", "length": "long"}
NGRAM = {"method_label": "ngram", "method": "ngram", "k": 3}
MTP = {"method_label": "mtp", "method": "mtp", "k": 2}
BASE = {"method_label": "baseline", "method": "none", "k": 0}


def case(
    case_id: str, group: dict[str, Any], method: dict[str, Any], lang: str, **values: Any
) -> Row:
    """One results row: the given values, plausible defaults for the rest."""
    row: Row = dict.fromkeys(COLUMN_NAMES)
    row.update(
        case_id=case_id,
        model="qwen3-0.6b",
        model_path="/models/qwen3-0.6b",
        lang=lang,
        prompts=8,
        warmup=1,
        repeats=3,
        concurrency=1,
        output_tokens=1024,
        output_chars=1536 if lang != "en" else 4096,
        output_bytes=4608 if lang != "en" else 4096,
        ttft_s=0.25,
        wall_s=40.0,
        run_dir=f"runs/{case_id}",
        signature=f"tokenlens:0.1.0|case:{case_id}",
        **group,
        **method,
    )
    if method["method"] != "none":
        row.update(num_drafts=300, num_draft_tokens=300 * method["k"], num_accepted_tokens=200)
    row.update(values)
    return row


# case id, setup, method, lang, tok/s and chars/s as "median min max" (only a median:
# no range), acceptance rate, acceptance per position. Plan order, baselines not first.
SYNTHETIC: tuple[tuple[Any, ...], ...] = (
    # wiki/short: a baseline and two methods in ja and en; c04 had one repeat
    ("c03", WIKI, NGRAM, "ja", "22.0 21.5 22.3", "33.0 32.3 33.4", 0.2, [0.3, 0.2, 0.1]),
    ("c04", WIKI, NGRAM, "en", "35.0 35.0 35.0", "140.0 140.0 140.0", 0.4, [0.6, 0.4, 0.2]),
    ("c01", WIKI, BASE, "ja", "20.0 19.5 20.4", "30.0 29.2 30.6", None, None),
    ("c02", WIKI, BASE, "en", "25.0 24.6 25.3", "100.0 98.4 101.2", None, None),
    ("c05", WIKI, MTP, "ja", "31.2 30.9 31.6", "46.8 46.4 47.4", 0.36, [0.5, 0.22]),
    ("c06", WIKI, MTP, "en", "45.0 44.1 45.9", "180.0 176.4 183.6", 0.5, [0.65, 0.35]),
    # news/long: no English baseline, Chinese as a third language
    ("d03", NEWS, MTP, "ja", "27.0 26.0 27.9", "40.5 39.0 41.9", 0.3, [0.42, 0.18]),
    ("d01", NEWS, BASE, "ja", "18.0 17.0 18.5", "27.0 25.5 27.8", None, None),
    ("d04", NEWS, MTP, "en", "40.0", "164.0", 0.45, None),
    ("d02", NEWS, BASE, "zh", "19.0 18.8 19.1", "26.6 26.3 26.7", None, None),
    ("d05", NEWS, MTP, "zh", "28.5 28.0 29.0", "39.9 39.2 40.6", 0.33, [0.45, 0.21]),
)


def synthetic_rows() -> list[Row]:
    """:data:`SYNTHETIC` as results rows, speedups against the baseline of the same
    setup and language as the bench computes them (none without that baseline)."""
    rows = []
    for case_id, setup, method, lang, tok, chars, acc, per_position in SYNTHETIC:
        row = case(case_id, setup, method, lang, acceptance_rate=acc)
        row["acceptance_per_position"] = per_position
        for column, stats in (("tok_s", tok), ("chars_s", chars)):
            names = (column, column + "_min", column + "_max")
            row.update(zip(names, map(float, stats.split()), strict=False))
        rows.append(row)
    for row in rows:
        base = [b for b in rows if b["method"] == "none" and b["lang"] == row["lang"]]
        base = [b for b in base if b["corpus"] == row["corpus"]]
        if base:
            row["baseline_case_id"] = base[0]["case_id"]
            row["speedup_tok_s"] = row["tok_s"] / base[0]["tok_s"]
            row["speedup_chars_s"] = row["chars_s"] / base[0]["chars_s"]
    return rows


def roundtrip(rows: list[Row], tmp_path: Path) -> list[Row]:
    """The rows as read back from a results.csv."""
    path = tmp_path / "results.csv"
    write_results(path, rows)
    return read_results(path)


LEGEND = """\
## Legend

- **tok/s**: output tokens / wall time of a measured repeat; the median over the repeats, \
with their min–max in parentheses when they differ.
- **chars/s**: characters of the output text / the same wall time. A token carries ~1.5 \
characters of Japanese but ~4 of English, so chars/s compares the languages by text \
delivered, tok/s by work done.
- **acc**: vLLM's acceptance rate, accepted / draft tokens over the measured repeats; – for \
the baseline, which drafts nothing.
- **speedup**: tok/s (chars/s) over the baseline (no speculation) of the same model, corpus, \
length and language; – when that baseline is missing.
- **EN/JA**: English / Japanese of the same row.
- **pos j**: unconditional acceptance at draft position j, accepted at j / drafts.
- –: missing or does not apply.
"""

# Checked by hand: ratios 25/20 = 1.25, 35/22 = 1.59, 45/31.2 = 1.44, 100/30 = 3.33,
# 140/33 = 4.24, 180/46.8 = 3.85, 40/27 = 1.48, 164/40.5 = 4.05; c04 has one repeat
# (no range); d04 has no range, no baseline and no per-position acceptance.
GOLDEN = (
    """\
# tokenlens bench: ja-en speed

MTP vs n-gram on the embedded pair

`tokenlens:0.1.0|vllm:0.32.0|plan:ja-en-speed@0123abcd`

tokenlens 0.1.0 · vLLM 0.32.0 · 11 of 12 cases · 2026-01-02T03:04:05Z

**Partial**: 11 of 12 cases done; the tables show those.

## qwen3-0.6b (bfloat16) · corpus wiki · length short

### Output tokens per second

| method | k | JA tok/s | EN tok/s | JA acc | EN acc | JA speedup | EN speedup | EN/JA |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
| baseline | 0 | 20.0 (19.5–20.4) | 25.0 (24.6–25.3) | – | – | 1.00× | 1.00× | 1.25 |
| ngram | 3 | 22.0 (21.5–22.3) | 35.0 | 0.20 | 0.40 | 1.10× | 1.40× | 1.59 |
| mtp | 2 | 31.2 (30.9–31.6) | 45.0 (44.1–45.9) | 0.36 | 0.50 | 1.56× | 1.80× | 1.44 |

### Output characters per second

| method | k | JA chars/s | EN chars/s | JA acc | EN acc | JA speedup | EN speedup | EN/JA |
|---|---:|---:|---:|---:|---:|---:|---:|---:|
| baseline | 0 | 30.0 (29.2–30.6) | 100.0 (98.4–101.2) | – | – | 1.00× | 1.00× | 3.33 |
| ngram | 3 | 33.0 (32.3–33.4) | 140.0 | 0.20 | 0.40 | 1.10× | 1.40× | 4.24 |
| mtp | 2 | 46.8 (46.4–47.4) | 180.0 (176.4–183.6) | 0.36 | 0.50 | 1.56× | 1.80× | 3.85 |

### Acceptance by draft position (unconditional: accepted at j / drafts)

| method | k | lang | pos 1 | pos 2 | pos 3 |
|---|---:|---|---:|---:|---:|
| ngram | 3 | ja | 0.30 | 0.20 | 0.10 |
| ngram | 3 | en | 0.60 | 0.40 | 0.20 |
| mtp | 2 | ja | 0.50 | 0.22 | – |
| mtp | 2 | en | 0.65 | 0.35 | – |

## qwen3-0.6b (float16, awq) · corpus news · length long

### Output tokens per second

| method | k | JA tok/s | EN tok/s | ZH tok/s | JA acc | EN acc | ZH acc | JA speedup | EN speedup \
| ZH speedup | EN/JA |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| baseline | 0 | 18.0 (17.0–18.5) | – | 19.0 (18.8–19.1) | – | – | – | 1.00× | – | 1.00× | – |
| mtp | 2 | 27.0 (26.0–27.9) | 40.0 | 28.5 (28.0–29.0) | 0.30 | 0.45 | 0.33 | 1.50× | – | 1.50× \
| 1.48 |

### Output characters per second

| method | k | JA chars/s | EN chars/s | ZH chars/s | JA acc | EN acc | ZH acc | JA speedup \
| EN speedup | ZH speedup | EN/JA |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|
| baseline | 0 | 27.0 (25.5–27.8) | – | 26.6 (26.3–26.7) | – | – | – | 1.00× | – | 1.00× | – |
| mtp | 2 | 40.5 (39.0–41.9) | 164.0 | 39.9 (39.2–40.6) | 0.30 | 0.45 | 0.33 | 1.50× | – \
| 1.50× | 4.05 |

### Acceptance by draft position (unconditional: accepted at j / drafts)

| method | k | lang | pos 1 | pos 2 |
|---|---:|---|---:|---:|
| mtp | 2 | ja | 0.42 | 0.18 |
| mtp | 2 | en | – | – |
| mtp | 2 | zh | 0.45 | 0.21 |

"""
    + LEGEND
)


def test_results_markdown_matches_the_golden_text(tmp_path: Path) -> None:
    rows = roundtrip(synthetic_rows(), tmp_path)
    assert results_markdown(rows, BENCH) == GOLDEN


def test_is_deterministic_and_independent_of_the_bench_dict_order(tmp_path: Path) -> None:
    rows = roundtrip(synthetic_rows(), tmp_path)
    reordered = dict(reversed(list(BENCH.items())))
    assert results_markdown(rows, BENCH) == results_markdown(rows, reordered)


def test_without_bench_json_or_rows() -> None:
    assert results_markdown([], None) == (
        "# tokenlens bench\n\n0 cases\n\nNo cases yet.\n\n" + LEGEND
    )


def test_missing_bench_keys_are_left_out(tmp_path: Path) -> None:
    rows = roundtrip(synthetic_rows()[:2], tmp_path)
    text = results_markdown(rows, {"plan": "not a table", "cases_total": 2})
    assert text.startswith("# tokenlens bench\n\n2 of 2 cases\n\n## qwen3-0.6b (bfloat16)")
    assert "Partial" not in text and "`" not in text


def test_pipes_in_names_do_not_break_the_table(tmp_path: Path) -> None:
    piped = case("x1", WIKI | {"corpus": "a|b"}, NGRAM | {"method_label": "n|g"}, "ja", tok_s=10.0)
    rows = roundtrip([piped], tmp_path)
    text = results_markdown(rows)
    assert "## qwen3-0.6b (bfloat16) · corpus a\\|b · length short" in text
    assert "| n\\|g | 3 | 10.0 | – | – |" in text


def test_duplicate_cases_are_named_not_dropped_silently(tmp_path: Path) -> None:
    first = case("x1", WIKI, NGRAM, "ja", tok_s=10.0)
    again = case("x2", WIKI, NGRAM, "ja", tok_s=11.0)
    text = results_markdown(roundtrip([first, again], tmp_path))
    assert "| ngram | 3 | 10.0 | – | – |" in text
    assert "Not shown: case x2, same method, k and language as case x1." in text


def test_formats_in_one_place() -> None:
    assert set(FORMATS) >= {"rate", "acc", "speedup", "ratio"}
    assert fmt(None, "rate") == MISSING and fmt(float("nan"), "acc") == MISSING
    assert fmt(12.345, "rate") == "12.3" and fmt(0.3649, "acc") == "0.36"
    assert spread(12.3, 11.94, 12.46, "rate") == "12.3 (11.9–12.5)"
    assert spread(12.3, 12.31, 12.34, "rate") == "12.3"  # range rounds away
    assert spread(12.3, None, 12.5, "rate") == "12.3"


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_no_ratio_column_with_one_of_the_two_languages(lang: str, tmp_path: Path) -> None:
    rows = roundtrip([r for r in synthetic_rows() if r["lang"] == lang], tmp_path)
    text = results_markdown(rows)
    assert "EN/JA |" not in text and f"| {lang.upper()} tok/s |" in text
