"""``tables.md``: the main tables of summary.json as Markdown, Japanese beside English.

Small on purpose: the HTML report is the full view; this is what one pastes into an
issue or a blog post, with the signature on top so the numbers travel with it. A figure
the data cannot support is printed as "not estimable (why)", never as a zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokenlens.analysis.summary_file import Estimate, Rate, Split, Summary, parse_summary
from tokenlens.format import MISSING, interval, lang_order, num, qty, rate_cell

PARTS = ("gap", "composition", "within", "out_of_support")


def _cell(entry: Rate | Estimate | None, key: str = "rate") -> str:
    return rate_cell(entry, count=True, key=key)


def _group_table(title: str, block: Mapping[str, Mapping[str, Rate]]) -> list[str]:
    langs = lang_order(block)
    groups: list[str] = []
    for lang in langs:
        groups += [g for g in block[lang] if g not in groups]
    lines = [f"## {title}", "", "| group | " + " | ".join(langs) + " |"]
    lines.append("|---|" + "---|" * len(langs))
    for g in groups:
        lines.append(f"| {g} | " + " | ".join(_cell(block[lang].get(g)) for lang in langs) + " |")
    return [*lines, ""]


def pp_cell(entry: Estimate | None) -> str:
    """``-6.2 pp [-7.9, -4.6]``, or ``not estimable (why)``."""
    text = interval(entry, "pp")
    if entry is not None and entry.value is not None and entry.no_interval:
        text += f" (no interval: {entry.no_interval})"
    return text


def _decomposition_rows(label: str, split: Split) -> list[str]:
    support = split.support
    shares = (
        f"{num(support.share_ja, 'share')} / {num(support.share_en, 'share')}"
        if support is not None
        else MISSING
    )
    return [f"| {label} | {shares} | " + " | ".join(pp_cell(split.part(p)) for p in PARTS) + " |"]


def render(summary: Summary | Mapping[str, Any]) -> str:
    """The Markdown text."""
    s = parse_summary(summary)
    lines = ["# tokenlens analysis", "", f"`{s.signature}`", ""]
    if s.prompts:
        lines += [
            "Prompts per language: "
            + ", ".join(f"{lang} {n}" for lang, n in s.prompts.items())
            + f" (verdicts need at least {s.settings.min_prompts}).",
            "",
        ]
    lines += ["## Acceptance (accepted / draft tokens, as vLLM counts)", ""]
    lines += ["| lang | rate [95% CI] | judged-position rate | accepted chars/step |"]
    lines += ["|---|---|---|---|"]
    for lang in lang_order(s.acceptance):
        judged = s.acceptance_judged.get(lang)
        chars = s.text_per_step.get(lang, {}).get("accepted_chars")
        lines.append(
            f"| {lang} | {_cell(s.acceptance[lang])} | {_cell(judged)} | {_cell(chars, 'value')} |"
        )
    lines.append("")
    for key, title in (
        ("by_script", "By script (judged positions)"),
        ("by_position", "By draft position (accepted at p / drafts, as vLLM counts)"),
        ("by_position_conditional", "By draft position (conditional on reaching it)"),
        ("by_confidence", "By target top-1 probability (judged positions)"),
    ):
        if s.breakdown(key):
            lines += _group_table(title, s.breakdown(key))
    if any(f.confidence is not None for f in s.families.values()):
        lines += [
            "## Japanese − English gap by the target's confidence, per drafter family",
            "",
            "gap = shared composition + shared within + out of support (docs/analysis.md). "
            "Support: share of Japanese / English judged rows in confidence bins both fill.",
            "",
            "| family | support ja / en | " + " | ".join(PARTS) + " |",
            "|---|---|" + "---|" * len(PARTS),
        ]
        for name, family in s.families.items():
            if family.confidence is not None:
                lines += _decomposition_rows(name.replace("_", "-"), family.confidence)
        if s.h2_contrast is not None:
            lines += [
                "",
                "H2 contrast (within-confidence gap, trained minus training-free): "
                + pp_cell(s.h2_contrast.difference),
            ]
        lines.append("")
    gap = s.gap
    if gap is not None:
        family_name = (gap.family or "").replace("_", "-")
        lines += [
            f"## Descriptive splits of the gap ({family_name} drafters)",
            "",
            f"All rows: {pp_cell(gap.overall)}; judged rows: {pp_cell(gap.judged)}.",
            "",
            "| by | support ja / en | " + " | ".join(PARTS) + " |",
            "|---|---|" + "---|" * len(PARTS),
        ]
        for column, split in gap.decomposition.items():
            lines += _decomposition_rows(column, split)
        lines.append("")
    lines += ["## Hypotheses", ""]
    for name, h in s.hypotheses.items():
        lines.append(f"- **{name}: {h.verdict}**. {h.evidence}")
        power = h.power
        if power is not None and power.mde is not None:
            lines.append(
                f"  Minimum detectable effect at this size: {qty(-power.mde, 'pp')}; "
                + "; ".join(
                    f"a {qty(-float(size), 'pp')} effect needs ~{n} prompts per language"
                    for size, n in power.prompts_needed.items()
                    if n is not None
                )
                + "."
            )
    lines += [
        "",
        "`*` fewer rows than min_count: shown, not used by the decomposition or verdicts.",
        "",
    ]
    return "\n".join(lines)


def write_tables(summary: Summary | Mapping[str, Any], path: Path) -> None:
    path.write_text(render(summary), encoding="utf-8")
