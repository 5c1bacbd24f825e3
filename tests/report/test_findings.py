"""FINDINGS.md against the summaries it is built from.

Two summaries: ``data/demo_summary.json``, the real output of ``tokenlens demo
--size medium`` (embedded pair on vLLM CPU, 3 prompts per language: verdicts
inconclusive, Japanese ahead), and the simulated analysis of conftest.py (planted
H1, no H2: supported / not supported). The bench rows are the synthetic bench of
tests/bench/test_tables.py. Every expected number is formatted here with its own
format string, not with the module's helpers, so a wrong value or format shows.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support import BENCH, PAYLOADS, roundtrip, synthetic_rows
from tokenlens.bench.results import Row, write_results
from tokenlens.report.findings import findings_markdown, write_findings

DATA = Path(__file__).parent / "data"
VERDICT = {
    "supported": "supported",
    "not_supported": "not supported",
    "inconclusive": "inconclusive",
}
DECOMPOSITIONS = ("conf_bucket", "script", "boundary", "particle_type", "rank_bucket")
BREAKDOWN = {
    "conf_bucket": "by_confidence",
    "script": "by_script",
    "boundary": "by_boundary",
    "particle_type": "by_particle",
    "rank_bucket": "by_bpe_rank",
}


def rate(stat: dict[str, Any]) -> str:
    return f"{stat['rate']:.3f} [{stat['ci_low']:.3f}, {stat['ci_high']:.3f}]"


def pp(stat: dict[str, Any], key: str = "value") -> str:
    v, lo, hi = stat[key], stat["ci_low"], stat["ci_high"]
    return f"{100 * v:+.1f} pp [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def pct(stat: dict[str, Any]) -> str:
    return (
        f"{100 * stat['value']:+.0f}% [{100 * stat['ci_low']:+.0f}%, {100 * stat['ci_high']:+.0f}%]"
    )


def section(text: str, title: str) -> str:
    """The body of the section headed ``title`` (up to the next heading of any level)."""
    start = text.index(title + "\n") + len(title) + 1
    found = re.search(r"^#{1,4} ", text[start:], re.M)
    return text[start : start + found.start()] if found else text[start:]


def unescape(cell: str) -> str:
    """What Markdown renders for a backslash-escaped cell."""
    return re.sub(r"\\(.)", r"\1", cell)


def table(text: str) -> list[list[str]]:
    """The rows (header first, separator dropped) of the first table in ``text``."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    rows = [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
    return [rows[0], *rows[2:]]


def contribution(cls: dict[str, Any]) -> float:
    return float(cls["composition"]["value"] + cls["within"]["value"])


@pytest.fixture(scope="module")
def demo() -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((DATA / "demo_summary.json").read_text("utf-8"))
    return summary


@pytest.fixture(scope="module")
def simulated(analysis: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((analysis / "summary.json").read_text("utf-8"))
    return summary


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[Row]:
    return roundtrip(synthetic_rows(), tmp_path_factory.mktemp("csv"))


def test_acceptance_and_gap_numbers_are_the_summarys(demo: dict[str, Any]) -> None:
    text = findings_markdown(demo)
    acceptance = table(section(text, "## Acceptance per language"))
    assert acceptance[0][:2] == ["language", "acceptance"]
    by_lang = {row[0]: row for row in acceptance[1:]}
    for lang, name in (("ja", "Japanese"), ("en", "English")):
        row = by_lang[name]
        assert row[1] == rate(demo["acceptance"][lang])
        assert row[2] == str(demo["acceptance"][lang]["n"])
        assert row[4] == rate(demo["acceptance_judged"][lang])
        chars = demo["text_per_step"][lang]["accepted_chars"]
        assert row[7] == f"{chars['value']:.2f} [{chars['ci_low']:.2f}, {chars['ci_high']:.2f}]"
    gap = section(text, "## The Japanese − English gap")
    assert f"All draft tokens: {pp(demo['gap']['overall'])}" in gap
    assert f"Judged positions: {pp(demo['gap']['judged'])}" in gap
    assert pct(demo["gap"]["relative_judged"]) in gap
    parts = {row[0]: row for row in table(section(text, "### Composition and within-class parts"))}
    assert len(parts) == 1 + len(DECOMPOSITIONS)
    for column in DECOMPOSITIONS:
        dec = demo["gap"]["decomposition"][column]
        matching = [r for r in parts.values() if r[2] == pp(dec["gap"])]
        row = next(r for r in matching if r[3] == pp(dec["composition"]))
        assert row[4] == pp(dec["within"])
        assert row[5] == f"{100 * dec['unshared_share_ja']:.0f}%"


def test_sparse_rates_are_marked(demo: dict[str, Any]) -> None:
    few = copy.deepcopy(demo)
    few["acceptance"]["en"]["sparse"] = True  # as with fewer than min_count draft tokens
    by_lang = {
        row[0]: row for row in table(section(findings_markdown(few), "## Acceptance per language"))
    }
    assert by_lang["English"][1] == rate(demo["acceptance"]["en"]) + "*"
    assert by_lang["Japanese"][1] == rate(demo["acceptance"]["ja"])  # not sparse: no mark
    assert f"fewer than {demo['settings']['min_count']} rows (sparse)" in findings_markdown(few)


def test_inconclusive_verdicts_keep_their_evidence(demo: dict[str, Any]) -> None:
    text = findings_markdown(demo)
    for key, name in (("H1", "tokenization / text structure"), ("H2", "training data")):
        h = demo["hypotheses"][key]
        assert h["verdict"] == "inconclusive"
        block = section(text, f"### {key} ({name}): **inconclusive**")
        assert f"Evidence (summary.json): {h['evidence']}" in block
        assert "Effect: not computed" in block
    short = section(text, "## In short")
    assert "- H1 (tokenization / text structure): **inconclusive**." in short
    assert "- H2 (training data): **inconclusive**." in short


def test_supported_and_not_supported_with_effects_and_checks(simulated: dict[str, Any]) -> None:
    text = findings_markdown(simulated)
    h1, h2 = simulated["hypotheses"]["H1"], simulated["hypotheses"]["H2"]
    assert (h1["verdict"], h2["verdict"]) == ("supported", "not_supported")  # as planted
    head1 = f"### H1 (tokenization / text structure): **{VERDICT[h1['verdict']]}**"
    head2 = f"### H2 (training data): **{VERDICT[h2['verdict']]}**"
    b1, b2 = section(text, head1), section(text, head2)
    assert f"by {h1['basis']}): {pp(h1, 'effect')} → yes:" in b1
    assert f"(n-gram) runs' gap: {pp(h1['ngram_gap'])} → yes:" in b1
    assert f"equal target confidence): {pp(h2, 'effect')} → no:" in b2
    contrast = h2["method_contrast"]
    assert f"trained drafters {pct(contrast['relative_gap_trained'])}" in b2
    assert f"n-gram {pct(contrast['relative_gap_training_free'])}" in b2
    assert f"difference {pct(contrast['difference'])} → unsure:" in b2
    for h, block in ((h1, b1), (h2, b2)):
        assert f"Evidence (summary.json): {h['evidence']}" in block
    settings = simulated["settings"]
    rules = section(text, "## H1 and H2")
    assert f"threshold δ = {100 * settings['delta']:.1f} pp" in rules
    assert f"({100 * settings['delta_relative']:.0f}% for relative effects)" in rules
    assert "docs/analysis.md" in rules


@pytest.mark.parametrize("which", ["demo", "simulated"])
def test_classes_with_largest_contribution_and_sparse_marks(
    which: str, request: pytest.FixtureRequest
) -> None:
    summary: dict[str, Any] = request.getfixturevalue(which)
    text = findings_markdown(summary)
    min_count = summary["settings"]["min_count"]
    marked = 0
    for column in DECOMPOSITIONS:
        dec = summary["gap"]["decomposition"][column]
        title = next(
            line
            for line in text.splitlines()
            if line.startswith("### Where it concentrates: by ") and column_label(column) in line
        )
        rows = table(section(text, title))[1:]
        expected = sorted(dec["classes"], key=lambda c: (-abs(contribution(c)), c["class"]))[:5]
        assert [unescape(r[0]) for r in rows] == [c["class"] for c in expected]
        counts = summary[BREAKDOWN[column]]
        for row, cls in zip(rows, expected, strict=True):
            assert row[1] == ("yes" if cls["shared"] else "no")
            assert row[6] == pp(cls["composition"]) and row[7] == pp(cls["within"])
            assert row[8] == f"{100 * contribution(cls):+.1f} pp"
            total = 0
            for lang, cell, rate_cell in (("ja", row[2], row[4]), ("en", row[3], row[5])):
                stat = counts.get(lang, {}).get(cls["class"])
                if stat is None:
                    assert cell == "0" and rate_cell == "–"
                    continue
                total += stat["n"]
                star = "*" if stat["n"] < min_count else ""
                assert stat["sparse"] == bool(star)
                share = f"{100 * cls[f'share_{lang}']:.0f}%"
                assert cell == f"{stat['n']}{star} ({share})"
                assert rate_cell == f"{cls[f'rate_{lang}']:.3f}{star}"
                marked += bool(star)
                if star:  # a class sparse in one language is not shared
                    assert not cls["shared"]
            assert total == cls["composition"]["n"]  # the counts are the decomposition's rows
    assert marked > 0  # the fixtures do have sparse classes to mark


def column_label(column: str) -> str:
    return {
        "conf_bucket": "confidence",
        "script": "script",
        "boundary": "boundary",
        "particle_type": "particle",
        "rank_bucket": "BPE rank",
    }[column]


def test_speed_from_bench_rows(demo: dict[str, Any], rows: list[Row]) -> None:
    text = findings_markdown(demo, rows, BENCH)
    speed = section(text, "### Measured (bench)")
    assert f"Plan `{BENCH['plan']['name']}`: {BENCH['plan']['description']}" in speed
    assert f"{BENCH['cases_done']} of {BENCH['cases_total']} cases measured" in speed
    groups = {}
    for title in re.findall(r"^#### (.+)$", text, re.M):
        groups[title] = table(section(text, "#### " + title))
    assert len(groups) == 2
    seen = 0
    for row in rows:
        if row["lang"] not in ("ja", "en"):
            continue
        title = next(t for t in groups if f"corpus {row['corpus']} " in t)
        header, *body = groups[title]
        line = next(r for r in body if r[:2] == [row["method_label"], str(row["k"])])
        col = {name: i for i, name in enumerate(header)}
        lang = row["lang"].upper()
        assert line[col[f"{lang} tok/s"]] == f"{row['tok_s']:.1f}"
        assert line[col[f"{lang} chars/s"]] == f"{row['chars_s']:.1f}"
        for metric, unit in (("speedup_tok_s", "tok/s"), ("speedup_chars_s", "chars/s")):
            value = row[metric]
            assert line[col[f"{lang} speedup ({unit})"]] == (
                "–" if value is None else f"{value:.2f}×"
            )
        acc = row["acceptance_rate"]
        assert line[col[f"{lang} acc"]] == ("–" if acc is None else f"{acc:.3f}")
        seen += 1
    assert seen == sum(r["lang"] in ("ja", "en") for r in rows)
    short = section(text, "## In short")
    for lang, name in (("ja", "Japanese"), ("en", "English")):
        spec = [r for r in rows if r["lang"] == lang and r["speedup_tok_s"] and r["k"]]
        best = max(spec, key=lambda r: r["speedup_tok_s"])
        assert (
            f"Best measured speedup, {name}: {best['speedup_tok_s']:.2f}× in tok/s, "
            f"{best['speedup_chars_s']:.2f}× in chars/s "
            f"({best['method_label']} k={best['k']}, corpus {best['corpus']})"
        ) in short
    assert "Other languages in results.csv: zh (see results.md)." in text


def test_without_bench_says_so(demo: dict[str, Any]) -> None:
    text = findings_markdown(demo)
    assert "No bench results were given" in section(text, "## Speed")
    assert "### Measured (bench)" not in text and "Best measured speedup" not in text
    model = table(section(text, "### Modelled from the traced runs"))[1:]
    expected = [
        (run["label"], lang, m)
        for run in demo["runs"]
        for lang, m in run["speed"]["by_lang"].items()
    ]
    assert len(model) == len(expected)
    for row, (label, lang, m) in zip(model, expected, strict=True):
        assert row[:2] == [f"`{label}`", {"ja": "Japanese", "en": "English"}[lang]]
        assert row[3] == f"{m['measured_tokens_per_step']:.2f}"
        assert row[6] == f"{m['recommended_speedup']:.2f}×"


def test_scope_states_only_what_the_repo_knows(
    demo: dict[str, Any], simulated: dict[str, Any]
) -> None:
    from tokenlens.text import load_tokenizer

    text = findings_markdown(demo)
    scope = section(
        text, "## What this can and cannot say about Qwen3.5 with MTP or D-Flash on a GPU"
    )
    for name in ("qwen2.5", "qwen3.5"):
        vocab = load_tokenizer(name)
        ranks = int((vocab.bpe_rank >= 0).sum())
        assert f"{ranks:,} ranks" in scope
    qwen35 = load_tokenizer("qwen3.5")
    specials = int((qwen35.bpe_rank < 0).sum())
    assert f"{int((qwen35.bpe_rank >= 0).sum()):,} ranks + {specials} specials" in scope
    assert "no MTP head and no D-Flash drafter" in scope and "greedily" in scope
    sampled = copy.deepcopy(demo)
    sampled["signature"] = sampled["signature"].replace("sampling:greedy", "sampling:t0.7")
    assert "The runs sample" in findings_markdown(sampled)
    other = section(
        findings_markdown(simulated),
        "## What this can and cannot say about Qwen3.5 with MTP or D-Flash on a GPU",
    )
    assert "not the embedded demo pair" in other and "151,643" not in other


def test_signatures_close_the_text(demo: dict[str, Any], rows: list[Row]) -> None:
    text = findings_markdown(demo, rows, BENCH)
    tail = section(text, "## Signatures")
    assert text.rstrip().endswith(tail.rstrip())
    assert f"- analysis: `{demo['signature']}`" in tail
    for run in demo["runs"]:
        assert f"- run `{run['label']}`: `{run['signature']}`" in tail
    assert f"- bench: `{BENCH['signature']}`" in tail


def test_same_input_same_text(simulated: dict[str, Any], rows: list[Row]) -> None:
    first = findings_markdown(simulated, rows, BENCH)
    assert findings_markdown(copy.deepcopy(simulated), copy.deepcopy(rows), BENCH) == first
    assert first.endswith("\n") and not first.endswith("\n\n")


def test_write_findings_reads_the_files(
    analysis: Path, tmp_path: Path, simulated: dict[str, Any]
) -> None:
    bench = tmp_path / "bench"
    bench.mkdir()
    write_results(bench / "results.csv", synthetic_rows())
    (bench / "bench.json").write_text(json.dumps(BENCH), "utf-8")
    path = write_findings(tmp_path / "FINDINGS.md", analysis, bench)
    rows = roundtrip(synthetic_rows(), tmp_path)
    assert path.read_text("utf-8") == findings_markdown(simulated, rows, BENCH)
    alone = write_findings(tmp_path / "alone.md", analysis, tmp_path / "no-bench")
    assert alone.read_text("utf-8") == findings_markdown(simulated)


def strip_code_spans(text: str) -> str:
    return re.sub(r"(`+)(.+?)\1", "", text)


def test_text_from_files_cannot_break_the_markdown(poisoned: Path) -> None:
    summary = json.loads((poisoned / "summary.json").read_text("utf-8"))
    classes = summary["gap"]["decomposition"]["script"]["classes"]
    biggest = max(classes, key=lambda c: abs(contribution(c)))
    for lang in ("ja", "en"):  # keep the class's counts under its new name
        if biggest["class"] in summary["by_script"].get(lang, {}):
            summary["by_script"][lang][PAYLOADS[2] + "|x"] = summary["by_script"][lang].pop(
                biggest["class"]
            )
    biggest["class"] = PAYLOADS[2] + "|x"
    summary["hypotheses"]["H2"]["evidence"] = "\n".join(PAYLOADS)
    bench_rows = synthetic_rows()
    for row in bench_rows:
        row["method_label"] = row["method_label"] + PAYLOADS[0]
    plan = {"name": PAYLOADS[5], "description": " ".join(PAYLOADS)}
    text = findings_markdown(summary, bench_rows, dict(BENCH, plan=plan, signature=PAYLOADS[1]))
    assert "\u2028" not in text and "\u2029" not in text  # line breaks collapsed
    prose = strip_code_spans(text)
    assert not re.search(r"(?<!\\)<", prose)  # every '<' outside code is escaped
    for block in re.split(r"\n\n", text):  # every table keeps its columns
        lines = [line for line in block.splitlines() if line.startswith("|")]
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in lines}
        assert len(widths) <= 1, block
    assert f"`{PAYLOADS[3]}`" in text  # a run label: literal in a code span
    cells = {
        unescape(c)
        for line in text.splitlines()
        if line.startswith("|")
        for c in re.split(r"(?<!\\)\|", line)[1:-1]
    }
    cells = {c.strip() for c in cells}
    assert "ngram" + PAYLOADS[0] in cells  # a method label renders as itself
    assert PAYLOADS[2] + "|x" in cells  # so does a class name with a pipe in it
