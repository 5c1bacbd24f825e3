"""FINDINGS.md against the summaries it is built from.

Two summaries, both regenerated from code every run (conftest.py): ``small``, a
smoke-sized study of 5 prompts per language (every verdict insufficient_data, splits
too thin to estimate), and ``simulated``, 30 prompts per language with H1 and H2
planted. The bench rows are the synthetic bench of tests/support.py. Every expected
number is formatted here with its own format string, not with the module's helpers,
so a wrong value or format shows.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support import BENCH, PAYLOADS, roundtrip, synthetic_rows
from tokenlens.bench_results import Row
from tokenlens.report.findings import findings_markdown

VERDICT = {
    "supported": "supported",
    "not_supported": "not supported",
    "no_japanese_deficit": "no Japanese deficit",
    "inconclusive": "inconclusive",
    "insufficient_data": "insufficient data",
}
READING = {"yes": "→ yes:", "no": "→ no:", "unsure": "→ unsure:", "n/a": "→ no reading:"}


def rate(stat: dict[str, Any]) -> str:
    return f"{stat['rate']:.3f} [{stat['ci_low']:.3f}, {stat['ci_high']:.3f}]"


def pp(stat: dict[str, Any], key: str = "value") -> str:
    v, lo, hi = stat[key], stat["ci_low"], stat["ci_high"]
    return f"{100 * v:+.1f} pp [{100 * lo:+.1f}, {100 * hi:+.1f}]"


def decided(stat: dict[str, Any]) -> str:
    """The decision interval the rule read, as FINDINGS prints it after the 95% one."""
    lo, hi = stat["decision_low"], stat["decision_high"]
    return f" (90% decision interval: {100 * lo:+.1f} to {100 * hi:+.1f} pp)"


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


@pytest.fixture(scope="module")
def demo(small: Path) -> dict[str, Any]:
    """The smoke-sized summary (named for the role the committed demo plays)."""
    summary: dict[str, Any] = json.loads((small / "summary.json").read_text("utf-8"))
    return summary


@pytest.fixture(scope="module")
def simulated(analysis: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((analysis / "summary.json").read_text("utf-8"))
    return summary


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[Row]:
    return roundtrip(synthetic_rows(), tmp_path_factory.mktemp("csv"))


def test_acceptance_and_gap_numbers_are_the_summarys(simulated: dict[str, Any]) -> None:
    text = findings_markdown(simulated)
    acceptance = table(section(text, "## Acceptance per language"))
    assert acceptance[0][:2] == ["language", "acceptance"]
    by_lang = {row[0]: row for row in acceptance[1:]}
    for lang, name in (("ja", "Japanese"), ("en", "English")):
        row = by_lang[name]
        assert row[1] == rate(simulated["acceptance"][lang])
        assert row[2] == str(simulated["acceptance"][lang]["n"])
        assert row[4] == rate(simulated["acceptance_judged"][lang])
        chars = simulated["text_per_step"][lang]["accepted_chars"]
        assert row[7] == f"{chars['value']:.2f} [{chars['ci_low']:.2f}, {chars['ci_high']:.2f}]"
    gap = section(text, "## The Japanese − English gap")
    assert f"All draft tokens (trained drafters): {pp(simulated['gap']['overall'])}" in gap
    assert f"Judged positions (trained drafters): {pp(simulated['gap']['judged'])}" in gap
    assert pct(simulated["gap"]["relative_judged"]) in gap
    assert f"(H2's effect): {pp(simulated['h2_contrast']['difference'])}" in gap
    split = {row[0]: row for row in table(gap)[1:]}
    for family, label in (("trained", "trained drafters"), ("training_free", "training-free")):
        dec = simulated["families"][family]["confidence"]
        row = next(r for key, r in split.items() if key.startswith("target") and label in key)
        assert row[2] == pp(dec["gap"])
        assert row[3] == pp(dec["composition"]) and row[4] == pp(dec["within"])
        out = dec["out_of_support"]
        assert row[5] == (pp(out) if out["ci_low"] is not None else f"{100 * out['value']:+.1f} pp")
        assert row[6] == f"{100 * (1 - dec['support']['share_ja']):.1f}%"


def test_sparse_rates_are_marked(simulated: dict[str, Any]) -> None:
    few = copy.deepcopy(simulated)
    few["acceptance"]["en"]["sparse"] = True  # as with fewer than min_count draft tokens
    by_lang = {
        row[0]: row for row in table(section(findings_markdown(few), "## Acceptance per language"))
    }
    assert by_lang["English"][1] == rate(simulated["acceptance"]["en"]) + "*"
    assert by_lang["Japanese"][1] == rate(simulated["acceptance"]["ja"])  # not sparse: no mark
    assert f"fewer than {simulated['settings']['min_count']} rows (sparse)" in findings_markdown(
        few
    )


def test_small_study_is_insufficient_data_and_says_what_it_needs(demo: dict[str, Any]) -> None:
    text = findings_markdown(demo)
    short = section(text, "## In short")
    assert demo["prompts"] == {"ja": 5, "en": 5}
    assert "- H1 (tokenization / text structure): **insufficient data**." in short
    assert "- H2 (training data): **insufficient data**." in short
    assert "This study has 5 prompts per language; the rules need 30" in short
    for key in ("H1", "H2"):  # the measured power (this small study could estimate it)
        needed = demo["hypotheses"][key]["power"]["prompts_needed"]
        assert f"{key} effect of 5.0 pp: ~{needed['0.05']}, 10.0 pp: ~{needed['0.1']}" in short
    unpowered = copy.deepcopy(demo)  # a study too thin to estimate the power
    for key in ("H1", "H2"):
        unpowered["hypotheses"][key]["power"] = {}
    assert "effect of 5.0 pp" not in section(findings_markdown(unpowered), "## In short")
    for key, name in (("H1", "tokenization / text structure"), ("H2", "training data")):
        h = demo["hypotheses"][key]
        block = section(text, f"### {key} ({name}): **insufficient data**")
        assert f"Evidence (summary.json): {h['evidence']}" in block
        assert "Too little data for a verdict: 5 Japanese and 5 English prompts" in block


def test_not_estimable_is_never_a_zero(demo: dict[str, Any]) -> None:
    text = findings_markdown(demo)
    assert "+0.0 pp [+0.0, +0.0]" not in text and "[+0.0, +0.0]" not in text
    split = section(text, "## The Japanese − English gap")
    notes = re.findall(r"^Not estimable: \((\d+)\) (.+)\.$", split, re.M)
    assert notes  # 5 prompts fill too few confidence bins for some split
    rows = table(split)[1:]
    for number, note in notes:
        label = note.split(":")[0]
        row = next(r for r in rows if r[0] == label)
        assert row[3:6] == [f"not estimable ({number})"] * 3
    # H2's effect not estimable (too few prompts in one family's confidence bins): the
    # block names the reason instead of a number.
    thin = copy.deepcopy(demo)
    h2 = thin["hypotheses"]["H2"]
    assert h2["effect"] is not None  # estimable in this study: the copy makes it not
    h2.update(effect=None, not_estimable="no n-gram tokens in a shared bin", reading="n/a")
    block = section(findings_markdown(thin), "### H2 (training data): **insufficient data**")
    assert "not estimable (no n-gram tokens in a shared bin)" in block
    assert READING["n/a"] in block


def test_verdicts_with_effects_checks_and_readings(simulated: dict[str, Any]) -> None:
    text = findings_markdown(simulated)
    for key, name in (("H1", "tokenization / text structure"), ("H2", "training data")):
        h = simulated["hypotheses"][key]
        block = section(text, f"### {key} ({name}): **{VERDICT[h['verdict']]}**")
        assert f"{pp(h, 'effect')}{decided(h)} {READING[h['reading']]}" in block
        check = h["check"]
        assert (
            f"Check ({check['name']}): {pp(check)}{decided(check)} {READING[check['reading']]}"
            in block
        )
        assert f"Evidence (summary.json): {h['evidence']}" in block
        assert (
            f"Power: with this data an effect must be about {-100 * h['power']['mde']:+.1f} pp"
            in (block)
        )
        assert "Caveat: " in block and "The target's own confidence also reflects" in block
    h1 = simulated["hypotheses"]["H1"]
    assert h1["verdict"] == "supported"  # planted, and 30 prompts per language
    rules = section(text, "## H1 and H2")
    assert f"threshold δ = {100 * simulated['settings']['delta']:.1f} pp" in rules
    assert "read on the 90% decision interval (a one-sided test at 5% against δ" in rules
    assert "at least 30 prompts per language" in rules and "docs/analysis.md" in rules


def test_exploratory_classes_in_the_summarys_order(simulated: dict[str, Any]) -> None:
    text = findings_markdown(simulated)
    explore = simulated["gap"]["explore"]
    block = section(text, "## Where it concentrates (exploratory)")
    assert f"of {explore['comparisons']} comparisons" in block and "Holm" in block
    rows = table(block)[1:]
    expected = explore["classes"][: len(rows)]
    assert len(rows) == min(8, len(explore["classes"])) > 0
    for row, cls in zip(rows, expected, strict=True):
        assert unescape(row[1]) == cls["by"] and unescape(row[2]) == cls["class"]
        assert row[3] == str(cls["rows_ja"]) and row[4] == str(cls["rows_en"])
        assert row[7] == pp(cls["difference"])
        assert row[8] == f"{cls['difference']['p_adjusted']:.3f}"


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
        # No bench and no --draft-cost: the cost is an assumption, so no best k.
        assert m["recommended_k"] is None
        assert row[5] == "none (c assumed)" and row[6] == "–"


def test_scope_states_only_what_the_repo_knows(
    demo: dict[str, Any], simulated: dict[str, Any]
) -> None:
    from tokenlens.text import load_tokenizer

    embedded = copy.deepcopy(demo)  # as the demo's runs sign themselves
    embedded["signature"] = embedded["signature"].replace(
        "model:simulated", "model:qwen2.5-coder-1.5b-instruct@cc324af070c2"
    )
    text = findings_markdown(embedded)
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
    sampled = copy.deepcopy(embedded)
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


def strip_code_spans(text: str) -> str:
    return re.sub(r"(`+)(.+?)\1", "", text)


def test_text_from_files_cannot_break_the_markdown(poisoned: Path) -> None:
    summary = json.loads((poisoned / "summary.json").read_text("utf-8"))
    summary["gap"]["explore"]["classes"][0]["class"] = PAYLOADS[2] + "|x"
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


REPORTS = Path(__file__).resolve().parents[2] / "reports"


@pytest.mark.parametrize("name", ["demo", "full"])
def test_committed_findings_come_from_their_files_byte_for_byte(name: str) -> None:
    """The committed samples' FINDINGS.md is the template's text of their own committed
    summary.json, bench and replay checks (tests/test_demo_reanalyze.py regenerates
    reports/demo's whole analysis too): a change to the writer that moves a byte shows."""
    from tokenlens.bench_results import read_results
    from tokenlens.demo.sizes import smoke_note

    root = REPORTS / name
    if not (root / "FINDINGS.md").is_file():
        pytest.skip(f"reports/{name} not committed")
    summary = json.loads((root / "analysis" / "summary.json").read_text("utf-8"))
    bench = root / "bench"
    rows = read_results(bench / "results.csv") if bench.is_dir() else None
    info = json.loads((bench / "bench.json").read_text("utf-8")) if bench.is_dir() else None
    check = root / "replay" / "check.json"
    checks = json.loads(check.read_text("utf-8")) if check.is_file() else None
    note = smoke_note("medium" if name == "demo" else "full")
    text = findings_markdown(summary, rows, info, checks, note)
    assert text.encode("utf-8") == (root / "FINDINGS.md").read_bytes()


def test_the_best_speedup_keeps_its_caveat() -> None:
    from tokenlens.report.findings_speed import short_speedups

    row = {
        "method": "ngram", "method_label": "ngram", "k": 3, "lang": "ja", "corpus": "full",
        "speedup_tok_s": 1.03, "speedup_chars_s": 1.03, "speedup_note": None,
    }  # fmt: skip
    (plain,) = short_speedups([row])
    assert plain["caveat"] == ""
    (flagged,) = short_speedups([{**row, "speedup_note": "measured in another bench invocation"}])
    assert flagged["caveat"] == "; measured in another bench invocation"


def test_the_hardware_caveat_follows_the_device_the_runs_ran_on() -> None:
    import copy

    from tokenlens.analysis.pipeline import device_label

    assert device_label({"engine": {"device": {"type": "cpu", "name": "x86"}}}) == "CPU"
    h200 = {"engine": {"device": {"type": "cuda", "name": "NVIDIA H200", "used": 1}}}
    assert device_label(h200) == "NVIDIA H200"
    assert device_label({}) is None and device_label({"engine": {"device": None}}) is None

    # the embedded pair's study: its scope prose has the hardware caveat
    path = Path(__file__).resolve().parents[2] / "reports" / "full" / "analysis" / "summary.json"
    demo = json.loads(path.read_text(encoding="utf-8"))

    def hardware(summary: dict[str, Any]) -> str:
        text = findings_markdown(summary)
        return next(line for line in text.splitlines() if line.startswith("- **Hardware.**"))

    cpu = copy.deepcopy(demo)
    for run in cpu["runs"]:
        run["device"] = "CPU"
    assert hardware(cpu).startswith("- **Hardware.** vLLM runs on the CPU")
    gpu = copy.deepcopy(demo)
    for run in gpu["runs"]:
        run["device"] = "NVIDIA H200"
    assert hardware(gpu).startswith("- **Hardware.** vLLM ran on NVIDIA H200")
    assert ", on NVIDIA H200." in findings_markdown(gpu)
    # a summary from before devices were recorded reads as before (the CPU prose)
    old = copy.deepcopy(demo)
    for run in old["runs"]:
        run.pop("device", None)
    assert hardware(old).startswith("- **Hardware.** vLLM runs on the CPU")
