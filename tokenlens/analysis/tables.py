"""``tables.md``: the main tables of summary.json as Markdown, Japanese beside English.

Small on purpose: the HTML report is the full view; this is what one pastes into an
issue or a blog post, with the signature on top so the numbers travel with it. A figure
the data cannot support is printed as "not estimable (why)", never as a zero.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenlens.format import MISSING, interval, lang_order, num, qty, rate_cell

PARTS = ("gap", "composition", "within", "out_of_support")


def _cell(entry: dict[str, Any] | None, key: str = "rate") -> str:
    return rate_cell(entry, count=True, key=key)


def _group_table(title: str, block: dict[str, Any]) -> list[str]:
    langs = lang_order(block)
    groups: list[str] = []
    for lang in langs:
        groups += [g for g in block[lang] if g not in groups]
    lines = [f"## {title}", "", "| group | " + " | ".join(langs) + " |"]
    lines.append("|---|" + "---|" * len(langs))
    for g in groups:
        lines.append(f"| {g} | " + " | ".join(_cell(block[lang].get(g)) for lang in langs) + " |")
    return [*lines, ""]


def pp_cell(entry: dict[str, Any] | None) -> str:
    """``-6.2 pp [-7.9, -4.6]``, or ``not estimable (why)``."""
    text = interval(entry, "pp")
    if entry and entry.get("value") is not None and entry.get("no_interval"):
        text += f" (no interval: {entry['no_interval']})"
    return text


def _decomposition_rows(label: str, dec: dict[str, Any]) -> list[str]:
    support = dec.get("support") or {}
    shares = (
        f"{num(support.get('share_ja'), 'share')} / {num(support.get('share_en'), 'share')}"
        if support
        else MISSING
    )
    return [f"| {label} | {shares} | " + " | ".join(pp_cell(dec.get(p)) for p in PARTS) + " |"]


def render(summary: dict[str, Any]) -> str:
    """The Markdown text."""
    lines = ["# tokenlens analysis", "", f"`{summary.get('signature')}`", ""]
    prompts = summary.get("prompts") or {}
    if prompts:
        lines += [
            "Prompts per language: "
            + ", ".join(f"{lang} {n}" for lang, n in prompts.items())
            + f" (verdicts need at least {summary['settings'].get('min_prompts')}).",
            "",
        ]
    acc = summary["acceptance"]
    lines += ["## Acceptance (accepted / draft tokens, as vLLM counts)", ""]
    lines += ["| lang | rate [95% CI] | judged-position rate | accepted chars/step |"]
    lines += ["|---|---|---|---|"]
    for lang in lang_order(acc):
        judged = summary.get("acceptance_judged", {}).get(lang)
        chars = summary.get("text_per_step", {}).get(lang, {}).get("accepted_chars")
        lines.append(f"| {lang} | {_cell(acc[lang])} | {_cell(judged)} | {_cell(chars, 'value')} |")
    lines.append("")
    for key, title in (
        ("by_script", "By script (judged positions)"),
        ("by_position", "By draft position (accepted at p / drafts, as vLLM counts)"),
        ("by_position_conditional", "By draft position (conditional on reaching it)"),
        ("by_confidence", "By target top-1 probability (judged positions)"),
    ):
        if summary.get(key):
            lines += _group_table(title, summary[key])
    families = summary.get("families") or {}
    if any((f or {}).get("confidence") for f in families.values()):
        lines += [
            "## Japanese − English gap by the target's confidence, per drafter family",
            "",
            "gap = shared composition + shared within + out of support (docs/analysis.md). "
            "Support: share of Japanese / English judged rows in confidence bins both fill.",
            "",
            "| family | support ja / en | " + " | ".join(PARTS) + " |",
            "|---|---|" + "---|" * len(PARTS),
        ]
        for name, block in families.items():
            if (block or {}).get("confidence"):
                lines += _decomposition_rows(name.replace("_", "-"), block["confidence"])
        contrast = summary.get("h2_contrast")
        if contrast:
            lines += [
                "",
                "H2 contrast (within-confidence gap, trained minus training-free): "
                + pp_cell(contrast.get("difference")),
            ]
        lines.append("")
    gap = summary.get("gap")
    if gap:
        family = str(gap.get("family", "")).replace("_", "-")
        lines += [
            f"## Descriptive splits of the gap ({family} drafters)",
            "",
            f"All rows: {pp_cell(gap.get('overall'))}; judged rows: {pp_cell(gap.get('judged'))}.",
            "",
            "| by | support ja / en | " + " | ".join(PARTS) + " |",
            "|---|---|" + "---|" * len(PARTS),
        ]
        for column, dec in gap.get("decomposition", {}).items():
            lines += _decomposition_rows(column, dec)
        lines.append("")
    lines += ["## Hypotheses", ""]
    for name, h in summary["hypotheses"].items():
        lines.append(f"- **{name}: {h['verdict']}**. {h['evidence']}")
        power = h.get("power") or {}
        if power.get("mde") is not None:
            needed = power.get("prompts_needed") or {}
            lines.append(
                f"  Minimum detectable effect at this size: {qty(-power['mde'], 'pp')}; "
                + "; ".join(
                    f"a {qty(-float(size), 'pp')} effect needs ~{n} prompts per language"
                    for size, n in needed.items()
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


def write_tables(summary: dict[str, Any], path: Path) -> None:
    path.write_text(render(summary), encoding="utf-8")
