"""results.md against a golden text written by hand from a small synthetic bench.

The synthetic results (:func:`tests.support.synthetic_rows`) go through
write_results/read_results first, so the tables see what a real results.csv gives
them. Two groups: wiki/short has a baseline and two methods (ngram k=3, mtp k=2) in
Japanese and English, in an order where the baseline is not first; news/long lacks the
English baseline, has Chinese as a third language, and one case without per-position
acceptance. The bench report tests use the same rows.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from tests.support import BENCH, NGRAM, WIKI, bench_case, roundtrip, synthetic_rows
from tokenlens.bench.results_md import results_markdown
from tokenlens.format import MISSING

LEGEND = """\
## Legend

- **tok/s**: output tokens / wall time of a measured repeat; the median over the repeats, \
with their min–max in parentheses when they differ.
- **chars/s**: characters of the output text / the same wall time. A token carries ~1.5 \
characters of Japanese but ~4 of English, so chars/s compares the languages by text \
delivered, tok/s by work done.
- **acc**: vLLM's acceptance rate, accepted / draft tokens over the measured repeats; – for \
the baseline, which drafts nothing.
- **runner**: the model runner (V1, V2) and async scheduling vLLM resolved for the case's \
engine.
- **speedup**: tok/s (chars/s) over the baseline (no speculation) of the same model, \
corpus, length, language and concurrency that ran on the same runner and async setting \
(like for like); – when there is none (the note under the table says why).
- **over**: the baseline each speed-up divides by.
- **EN/JA**: English / Japanese of the same row.
- **pos j**: unconditional acceptance at draft position j, accepted at j / drafts.
- **step ms**: median time of one decoding step (the model runner's execute_model + \
sample_tokens), from tokenlens's step timer in the worker; **drafting ms** the drafter's \
part of it, **verification ms** the rest (target forward pass, sampling, bookkeeping); \
**tokens/step** = 1 + accepted / drafts per request; **drafter cost** = drafting / the \
like-for-like baseline's step, in target steps; **c** = that per drafted token; **timer \
µs** the timer's own time per step.
- **traced / plain**: tok/s with tokenlens tracing over tok/s of the same case on an engine \
without the plugin (bench --compare-plain); **one invocation**: whether both were measured \
by the same bench invocation (no: a resumed bench, not like for like).
- –: missing or does not apply.
"""

# The legend, typed here from docs/bench.md's description of results.md (not copied
# from the code): a changed legend must show up as a failing golden test.
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

| method | k | runner | JA tok/s | EN tok/s | JA acc | EN acc | JA speedup | EN speedup | \
EN/JA | over |
|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|
| baseline | 0 | runner unknown | 20.0 (19.5–20.4) | 25.0 (24.6–25.3) | – | – | 1.00× | \
1.00× | 1.25 | – |
| ngram | 3 | runner unknown | 22.0 (21.5–22.3) | 35.0 | 0.200 | 0.400 | 1.10× | 1.40× | \
1.59 | baseline |
| mtp | 2 | runner unknown | 31.2 (30.9–31.6) | 45.0 (44.1–45.9) | 0.360 | 0.500 | 1.56× | \
1.80× | 1.44 | baseline |

### Output characters per second

| method | k | runner | JA chars/s | EN chars/s | JA acc | EN acc | JA speedup | EN speedup \
| EN/JA | over |
|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|
| baseline | 0 | runner unknown | 30.0 (29.2–30.6) | 100.0 (98.4–101.2) | – | – | 1.00× | \
1.00× | 3.33 | – |
| ngram | 3 | runner unknown | 33.0 (32.3–33.4) | 140.0 | 0.200 | 0.400 | 1.10× | 1.40× | \
4.24 | baseline |
| mtp | 2 | runner unknown | 46.8 (46.4–47.4) | 180.0 (176.4–183.6) | 0.360 | 0.500 | 1.56× \
| 1.80× | 3.85 | baseline |

### Acceptance by draft position (unconditional: accepted at j / drafts)

| method | k | lang | pos 1 | pos 2 | pos 3 |
|---|---:|---|---:|---:|---:|
| ngram | 3 | ja | 0.300 | 0.200 | 0.100 |
| ngram | 3 | en | 0.600 | 0.400 | 0.200 |
| mtp | 2 | ja | 0.500 | 0.220 | – |
| mtp | 2 | en | 0.650 | 0.350 | – |

## qwen3-0.6b (float16, awq) · corpus news · length long

### Output tokens per second

| method | k | runner | JA tok/s | EN tok/s | ZH tok/s | JA acc | EN acc | ZH acc | JA \
speedup | EN speedup | ZH speedup | EN/JA | over |
|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|
| baseline | 0 | runner unknown | 18.0 (17.0–18.5) | – | 19.0 (18.8–19.1) | – | – | – | \
1.00× | – | 1.00× | – | – |
| mtp | 2 | runner unknown | 27.0 (26.0–27.9) | 40.0 | 28.5 (28.0–29.0) | 0.300 | 0.450 | \
0.330 | 1.50× | – | 1.50× | 1.48 | baseline |

### Output characters per second

| method | k | runner | JA chars/s | EN chars/s | ZH chars/s | JA acc | EN acc | ZH acc | \
JA speedup | EN speedup | ZH speedup | EN/JA | over |
|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|
| baseline | 0 | runner unknown | 27.0 (25.5–27.8) | – | 26.6 (26.3–26.7) | – | – | – | \
1.00× | – | 1.00× | – | – |
| mtp | 2 | runner unknown | 40.5 (39.0–41.9) | 164.0 | 39.9 (39.2–40.6) | 0.300 | 0.450 | \
0.330 | 1.50× | – | 1.50× | 4.05 | baseline |

### Acceptance by draft position (unconditional: accepted at j / drafts)

| method | k | lang | pos 1 | pos 2 |
|---|---:|---|---:|---:|
| mtp | 2 | ja | 0.420 | 0.180 |
| mtp | 2 | en | – | – |
| mtp | 2 | zh | 0.450 | 0.210 |

"""
    + LEGEND
)


def test_results_markdown_matches_the_golden_text(tmp_path: Path) -> None:
    rows = roundtrip(synthetic_rows(), tmp_path)
    assert results_markdown(rows, BENCH) == GOLDEN


def _header_terms(text: str) -> set[str]:
    """The column names of every table, without their language prefix (``JA tok/s`` ->
    ``tok/s``, ``pos 2`` -> ``pos j``), and the missing-value mark when a cell has it."""
    terms = set()
    lines = text.splitlines()
    for header, rule in pairwise(lines):
        if not (header.startswith("| ") and rule.startswith("|---")):
            continue
        for cell in header.strip("| ").split(" | "):
            words = cell.split(" ", 1)
            if len(words) == 2 and words[0].isupper() and words[0].isalpha():
                cell = words[1]  # "JA acc" -> "acc"
            terms.add("pos j" if cell.startswith("pos ") else cell)
    if f"| {MISSING} |" in text:
        terms.add(MISSING)
    return terms - {"method", "k", "lang"}


def test_legend_explains_every_column(tmp_path: Path) -> None:
    text = results_markdown(roundtrip(synthetic_rows(), tmp_path), BENCH)
    tables, legend = text.split("## Legend\n")
    terms = _header_terms(tables)
    assert terms == {
        "tok/s", "chars/s", "acc", "speedup", "EN/JA", "pos j", "runner", "over", MISSING
    }  # fmt: skip
    explained = {line[2:].split(":")[0].strip("*") for line in legend.splitlines() if line}
    assert terms <= explained


def test_same_text_from_results_csv_as_from_the_rows(tmp_path: Path) -> None:
    """What the bench writes before and after a resume (rows in memory, rows read back
    from results.csv) gives the same results.md."""
    rows = synthetic_rows()
    assert results_markdown(roundtrip(rows, tmp_path), BENCH) == results_markdown(rows, BENCH)


def test_groups_and_methods_follow_plan_order(tmp_path: Path) -> None:
    """Groups and methods appear in plan order (the order of the rows), baselines first
    within a group: reversing the plan reverses them."""
    rows = roundtrip(list(reversed(synthetic_rows())), tmp_path)
    text = results_markdown(rows, BENCH)
    assert text.index("## qwen3-0.6b (float16, awq)") < text.index("## qwen3-0.6b (bfloat16)")
    wiki = text[text.index("## qwen3-0.6b (bfloat16)") :]
    methods = [line.split(" | ")[0] for line in wiki.splitlines() if line.startswith("| ")][1:4]
    assert methods == ["| baseline", "| mtp", "| ngram"]
    assert "| JA tok/s | EN tok/s | ZH tok/s |" in text  # languages: Japanese first, always


def test_without_bench_json_or_rows() -> None:
    assert results_markdown([], None) == (
        "# tokenlens bench\n\n0 cases\n\nNo cases yet.\n\n" + LEGEND
    )


def test_missing_bench_keys_are_left_out(tmp_path: Path) -> None:
    rows = roundtrip(synthetic_rows()[:2], tmp_path)
    text = results_markdown(rows, {"plan": "not a table", "cases_total": 2})
    assert text.startswith("# tokenlens bench\n\n2 of 2 cases\n\n## qwen3-0.6b (bfloat16)")
    assert "Partial" not in text and "`" not in text


def test_names_are_escaped_with_the_one_markdown_rule(tmp_path: Path) -> None:
    piped = bench_case(
        "x1", WIKI | {"corpus": "a|b"}, NGRAM | {"method_label": "n|g_<b>"}, "ja", tok_s=10.0
    )
    rows = roundtrip([piped], tmp_path)
    text = results_markdown(rows, {"plan": {"name": "p*q", "description": "one\ntwo <i>"}})
    assert "## qwen3-0.6b (bfloat16) · corpus a\\|b · length short" in text
    assert "| n\\|g\\_\\<b\\> | 3 | runner unknown | 10.0 | – | – |" in text
    assert text.startswith("# tokenlens bench: p\\*q\n\none two \\<i\\>\n")


def test_duplicate_cases_are_named_not_dropped_silently(tmp_path: Path) -> None:
    first = bench_case("x1", WIKI, NGRAM, "ja", tok_s=10.0)
    again = bench_case("x2", WIKI, NGRAM, "ja", tok_s=11.0)
    text = results_markdown(roundtrip([first, again], tmp_path))
    assert "| ngram | 3 | runner unknown | 10.0 | – | – |" in text
    assert "Not shown: case x2, same method, k and language as case x1." in text


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_no_ratio_column_with_one_of_the_two_languages(lang: str, tmp_path: Path) -> None:
    rows = roundtrip([r for r in synthetic_rows() if r["lang"] == lang], tmp_path)
    text = results_markdown(rows)
    assert "EN/JA |" not in text and f"| {lang.upper()} tok/s |" in text
