"""``tables.md``: the main tables of summary.json as Markdown, Japanese beside English.

Small on purpose: the HTML report is the full view; this is what one pastes into an
issue or a blog post, with the signature on top so the numbers travel with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

LANG_ORDER = ("ja", "en")


def _langs(block: dict[str, Any]) -> list[str]:
    return [x for x in LANG_ORDER if x in block] + sorted(x for x in block if x not in LANG_ORDER)


def _cell(entry: dict[str, Any] | None, key: str = "rate") -> str:
    if not entry or entry.get(key) is None:
        return "–"
    lo, hi = entry.get("ci_low"), entry.get("ci_high")
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None else ""
    mark = "*" if entry.get("sparse") else ""
    return f"{entry[key]:.3f}{ci} (n={entry['n']}){mark}"


def _group_table(title: str, block: dict[str, Any]) -> list[str]:
    langs = _langs(block)
    groups: list[str] = []
    for lang in langs:
        groups += [g for g in block[lang] if g not in groups]
    lines = [f"## {title}", "", "| group | " + " | ".join(langs) + " |"]
    lines.append("|---|" + "---|" * len(langs))
    for g in groups:
        lines.append(f"| {g} | " + " | ".join(_cell(block[lang].get(g)) for lang in langs) + " |")
    return [*lines, ""]


def _pp(entry: dict[str, Any] | None) -> str:
    if not entry or entry.get("value") is None:
        return "–"
    lo, hi = entry.get("ci_low"), entry.get("ci_high")
    ci = f" [{100 * lo:+.1f}, {100 * hi:+.1f}]" if lo is not None and hi is not None else ""
    return f"{100 * entry['value']:+.1f} pp{ci}"


def render(summary: dict[str, Any]) -> str:
    """The Markdown text."""
    lines = ["# tokenlens analysis", "", f"`{summary.get('signature')}`", ""]
    acc = summary["acceptance"]
    lines += ["## Acceptance (accepted / draft tokens, as vLLM counts)", ""]
    lines += ["| lang | rate [95% CI] | judged-position rate | accepted chars/step |"]
    lines += ["|---|---|---|---|"]
    for lang in _langs(acc):
        judged = summary.get("acceptance_judged", {}).get(lang)
        chars = summary.get("text_per_step", {}).get(lang, {}).get("accepted_chars")
        lines.append(f"| {lang} | {_cell(acc[lang])} | {_cell(judged)} | {_cell(chars, 'value')} |")
    lines.append("")
    for key, title in (
        ("by_script", "By script (judged positions)"),
        ("by_position", "By draft position (unconditional)"),
        ("by_position_conditional", "By draft position (conditional on reaching it)"),
        ("by_confidence", "By target top-1 probability (judged positions)"),
    ):
        if summary.get(key):
            lines += _group_table(title, summary[key])
    gap = summary.get("gap")
    if gap:
        lines += [
            "## Japanese − English gap",
            "",
            "| part | by | value [95% CI] |",
            "|---|---|---|",
        ]
        lines.append(f"| overall (all rows) | – | {_pp(gap['overall'])} |")
        for column, dec in gap["decomposition"].items():
            for part in ("gap", "composition", "within"):
                lines.append(f"| {part} (judged) | {column} | {_pp(dec[part])} |")
        lines.append("")
    lines += ["## Hypotheses", ""]
    for name, h in summary["hypotheses"].items():
        lines.append(f"- **{name}: {h['verdict']}**. {h['evidence']}")
    lines += [
        "",
        "`*` fewer rows than min_count: shown, not used by the decomposition or verdicts.",
        "",
    ]
    return "\n".join(lines)


def write_tables(summary: dict[str, Any], path: Path) -> None:
    path.write_text(render(summary), encoding="utf-8")
