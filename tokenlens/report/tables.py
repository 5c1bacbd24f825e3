"""``tables.md``: the main tables of summary.json as Markdown, Japanese beside English.

Small on purpose: the HTML report is the full view; this is what one pastes into an
issue or a blog post, with the signature on top so the numbers travel with it. A figure
the data cannot support is printed as "not estimable (why)", never as a zero.

Nothing here pools drafter families or k: acceptance and acceptance by draft position
are per run, the judged-position figures per drafter family (which pools that family's
runs, as the verdicts do; each table says which runs), and class breakdowns are
Japanese − English differences within each class, per family.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenlens.analysis import rejection_rows
from tokenlens.analysis.summary_figures import ClassTable, Estimate, Rate, Split
from tokenlens.analysis.summary_file import (
    SUMMARY,
    Summary,
    load_summary,
    parse_summary,
)
from tokenlens.analysis.summary_runs import RunSummary
from tokenlens.analysis.token_classes import class_label
from tokenlens.analysis.wording import runs_phrase
from tokenlens.format import (
    LANG_ORDER,
    MISSING,
    VERDICT_WORDS,
    interval,
    lang_order,
    num,
    qty,
    rate_cell,
)
from tokenlens.report.tables_length import byte_length_lines

TABLES = "tables.md"
PARTS = ("gap", "composition", "within", "out_of_support")
FAMILY_WORDS = {"trained": "trained drafters", "training_free": "training-free (n-gram) drafters"}
STATUS_WORDS = {
    "compared": "",
    "only_ja": "Japanese only: not compared",
    "only_en": "English only: not compared",
    "per_language": "tokens differ in kind: per language, not contrasted",
    "sparse": "too few rows in both",
}


def _cell(entry: Rate | Estimate | None, key: str = "rate") -> str:
    return rate_cell(entry, count=True, key=key)


def family_words(name: str | None) -> str:
    return FAMILY_WORDS.get(str(name), str(name))


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


def _runs_table(s: Summary) -> list[str]:
    lines = [
        "## Acceptance per run (accepted / draft tokens, as vLLM counts)",
        "",
        "One row per run: vLLM's rate depends on the method and on k, so it is never pooled "
        "across runs here. Judged-position rate: accepted / (accepted + the first rejection "
        "of each step).",
        "",
        "| run | method | k | ja | en | ja judged | en judged | ja chars/step | en chars/step "
        "| ja bytes/step | en bytes/step | JA − EN, all draft tokens |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in s.runs:
        chars = [
            _cell((run.text_per_step.get(lang) or {}).get(key), "value")
            for key in ("accepted_chars", "accepted_bytes")
            for lang in LANG_ORDER
        ]
        lines.append(
            f"| {run.label} | {run.method} | {run.k} | "
            + " | ".join(_cell(run.acceptance.get(lang)) for lang in LANG_ORDER)
            + " | "
            + " | ".join(_cell(run.acceptance_judged.get(lang)) for lang in LANG_ORDER)
            + " | "
            + " | ".join(chars)
            + f" | {pp_cell(run.gap)} |"
        )
    return [*lines, ""]


def position_rows(runs: Sequence[RunSummary], conditional: bool) -> tuple[int, list[list[str]]]:
    """(positions, rows): one row per run and language, one cell per draft position."""
    width = max((run.k or 0 for run in runs), default=0)
    rows = []
    for run in runs:
        block = run.by_position_conditional if conditional else run.by_position
        for lang in lang_order(block):
            cells = [_cell(block[lang].get(str(p))) for p in range(width)]
            rows.append([str(run.label), str(run.k), lang, *cells])
    return width, rows


def _positions(s: Summary) -> list[str]:
    lines: list[str] = []
    for conditional, title, text in (
        (
            False,
            "## By draft position, per run: accepted at p / drafts at p",
            "Over the steps that proposed a draft at p (vLLM's per-position acceptance; a "
            "position exists only in runs with k above it, so runs are never pooled). "
            "summary.json also has `per_draft`: accepted at p / all the run's steps.",
        ),
        (
            True,
            "## By draft position, per run: conditional on reaching p",
            "Accepted at p / steps that reached p (drafts 0..p−1 accepted and a draft at p).",
        ),
    ):
        width, rows = position_rows(s.runs, conditional)
        if not rows:
            continue
        lines += [title, "", text, ""]
        lines.append("| run | k | lang | " + " | ".join(f"p{p}" for p in range(width)) + " |")
        lines.append("|---|---|---|" + "---|" * width)
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        lines.append("")
    return lines


def _families(s: Summary) -> list[str]:
    if not s.families:
        return []
    lines = [
        "## Per drafter family (judged positions)",
        "",
        "Each family pools its own runs (listed), never the other family's: the rows the "
        "verdicts read. vLLM's all-draft-token gap pooled over several k is shown for the "
        "sensitivity of the no-deficit gate only.",
        "",
        "| family | runs | ja judged | en judged | JA − EN judged | JA − EN all draft tokens |",
        "|---|---|---|---|---|---|",
    ]
    for name, fam in s.families.items():
        lines.append(
            f"| {family_words(name)} | {runs_phrase(fam.configurations)} | "
            + " | ".join(_cell(fam.acceptance_judged.get(lang)) for lang in LANG_ORDER)
            + f" | {pp_cell(fam.gap_judged)} | {pp_cell(fam.gap_all)} |"
        )
    return [*lines, ""]


def class_rows(table: ClassTable) -> list[list[str]]:
    """Rows of one family of comparisons: class, status, rates, difference, p values."""
    rows = []
    for c in table.classes:
        d = c.difference
        rows.append(
            [
                str(c.cls),
                STATUS_WORDS.get(str(c.status), str(c.status)),
                _cell(c.rate_ja),
                _cell(c.rate_en),
                interval(d, "pp") if d is not None else MISSING,
                f"[{num(d.adjusted_low, 'pp')}, {num(d.adjusted_high, 'pp')}]"
                if d is not None and d.adjusted_low is not None
                else MISSING,
                num(d.p, "rate") if d is not None else MISSING,
                num(d.p_holm, "rate") if d is not None else MISSING,
            ]
        )
    return rows


CLASS_HEADER = (
    "class",
    "note",
    "ja judged rate",
    "en judged rate",
    "JA − EN [95%]",
    "simultaneous interval",
    "p",
    "Holm p",
)


def _classes(s: Summary) -> list[str]:
    classes = s.classes
    if classes is None or not classes.families:
        return []
    lines = [
        "## Class breakdowns: Japanese − English within each class, per drafter family",
        "",
        "Judged rows, each classified by the token that came out. Family of comparisons: "
        f"{classes.family_of_comparisons}. The simultaneous interval is Bonferroni's at "
        "1 − 0.05/m for the m compared classes of the table; p is two-sided from the "
        "prompt-pair bootstrap. A class only one language fills (fewer than min_count "
        "rows or too few prompts in the other) is marked and not compared; a class both "
        "fill with different kinds of token (analysis/comparable.py) is shown per "
        "language and not contrasted.",
        "",
    ]
    for name, fam in classes.families.items():
        for column, table in fam.by.items():
            lines += [
                f"### {family_words(name)}, {class_label(column)} "
                f"({table.comparisons} compared; runs {', '.join(fam.runs)})",
                "",
                "| " + " | ".join(CLASS_HEADER) + " |",
                "|" + "---|" * len(CLASS_HEADER),
            ]
            lines += ["| " + " | ".join(row) + " |" for row in class_rows(table)]
            lines.append("")
    return lines


def _rejections(s: Summary) -> list[str]:
    if not s.rejections:
        return []
    legacy = all(b.legacy for b in s.rejections.values())
    lines = [
        "## Rejections by kind (docs/analysis.md)",
        "",
        rejection_rows.LEGACY_DEFINITION if legacy else rejection_rows.DEFINITION,
        "Each cell: count (share of the rejections with a kind, 95% prompt-pair interval); "
        "flags: the draft, or the target's replacement, ends inside a UTF-8 character.",
        "",
    ]
    tables: list[tuple[str, Mapping[str, Any]]] = [("family", s.rejections)]
    if s.rejection_runs:
        tables.append(("run", s.rejection_runs))
    for first, blocks in tables:
        head = rejection_rows.header(blocks, first)
        label = rejection_rows.run_label if first == "run" else _family_label
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rejection_rows.rows(blocks, label)]
        lines.append("")
    for name, fam in s.rejections.items():
        what = "T-starts-with-D share" if fam.legacy else "Re-segmentation share"
        lines.append(f"{what}, JA − EN ({family_words(name)}): {pp_cell(rejection_rows.gap(fam))}.")
    return [*lines, ""]


def _family_label(name: str, _block: Any) -> str:
    return family_words(name)


def _domains(s: Summary) -> list[str]:
    if not s.domains:
        return []
    lines = [
        "## Per domain: judged gap, Japanese − English",
        "",
        f"Domains: {s.domain_source}. Intervals 95% over the domain's prompt pairs; the "
        "reading against −δ uses the decision interval Bonferroni-adjusted for the number "
        "of domains. Heterogeneity: a permutation test of the domain labels over prompt "
        "pairs (docs/analysis.md says why).",
        "",
    ]
    for name, fam in s.domains.items():
        lines += [
            f"### {family_words(name)}",
            "",
            "| domain | pairs | ja | en | JA − EN [95%] | adjusted decision interval | reading |",
            "|---|---|---|---|---|---|---|",
        ]
        for domain, g in fam.domains.items():
            lines.append(
                f"| {domain} | {g.pairs} | {num(g.rate_ja, 'rate')} | {num(g.rate_en, 'rate')} "
                f"| {interval(g, 'pp')} | {num(g.adjusted_low, 'pp')} to "
                f"{qty(g.adjusted_high, 'pp')} | {g.reading} |"
            )
        het = fam.heterogeneity
        if het is not None:
            text = (
                f"not estimable ({het.not_estimable})"
                if het.not_estimable
                else f"spread {qty(het.spread, 'pp').lstrip('+')} between domains (by chance "
                f"alone about {qty(het.chance_spread, 'pp').lstrip('+')}), p = "
                f"{num(het.p, 'rate')} ({het.permutations} permutations)"
            )
            lines += ["", f"Heterogeneity ({het.test}): {text}."]
        for label, items in (("Departs", fam.departures), ("Not settled", fam.concerns)):
            if items:
                names = ", ".join(note.domain for note in items if note.domain)
                lines.append(f"{label} from the pooled reading: {names}.")
        lines.append("")
    return lines


def _sensitivity_lines(s: Summary) -> list[str]:
    lines = []
    for name, h in s.hypotheses.items():
        sens = h.sensitivity
        if sens is None or sens.not_computed:
            continue
        parts = []
        if sens.flip_below:
            parts.append(
                f"{VERDICT_WORDS.get(sens.flip_below[1], sens.flip_below[1])} "
                f"for δ < {100 * sens.flip_below[0]:.2f} pp"
            )
        if sens.flip_above:
            parts.append(
                f"{VERDICT_WORDS.get(sens.flip_above[1], sens.flip_above[1])} "
                f"for δ > {100 * sens.flip_above[0]:.2f} pp"
            )
        flips = "; ".join(parts) if parts else "the same for every δ up to 50 pp"
        per_k = ", ".join(
            f"k = {k}: {VERDICT_WORDS.get(str(e.verdict), e.verdict)}"
            f" (all tokens: {VERDICT_WORDS.get(str(e.verdict_all_tokens), e.verdict_all_tokens)})"
            for k, e in sens.per_k.items()
        )
        all_tokens = sens.all_tokens.verdict if sens.all_tokens is not None else None
        lines.append(
            f"  Sensitivity of {name}: {flips}; on vLLM's all-draft-token gap: "
            f"{VERDICT_WORDS.get(str(all_tokens), all_tokens)}; under the previous "
            f"95% reading: {VERDICT_WORDS.get(str(sens.previous), sens.previous)} (the rule "
            "was changed after calibration)" + (f"; per k: {per_k}" if per_k else "") + "."
        )
    return lines


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
    lines += _runs_table(s)
    lines += _positions(s)
    lines += _families(s)
    if s.scope is not None and s.breakdown("by_confidence"):
        block = s.breakdown("by_confidence")
        langs = lang_order(block)
        groups: list[str] = []
        for lang in langs:
            groups += [g for g in block[lang] if g not in groups]
        lines += [
            f"## By target top-1 probability ({family_words(s.scope.family)}, judged "
            f"positions, {runs_phrase(s.scope.configurations)})",
            "",
            "| group | " + " | ".join(langs) + " |",
            "|---|" + "---|" * len(langs),
        ]
        for g in groups:
            lines.append(
                f"| {g} | " + " | ".join(_cell(block[lang].get(g)) for lang in langs) + " |"
            )
        lines.append("")
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
    lines += _classes(s)
    lines += byte_length_lines(s, family_words)
    lines += _rejections(s)
    lines += _domains(s)
    gap = s.gap
    if gap is not None:
        lines += [
            f"## Descriptive splits of the gap ({family_words(gap.family)})",
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
        statement = h.statement or ""
        if statement and statement.rstrip(".") in (h.evidence or ""):
            statement = ""  # the evidence already says it (a no-deficit verdict)
        lines.append(f"- **{name}: {h.verdict}**. {statement} {h.evidence or ''}".rstrip())
        power = h.power
        if power is not None and power.mde is not None:
            lines.append(
                "  Minimum detectable effect at this size"
                + (f" ({power.rule})" if power.rule else "")
                + f": {qty(-power.mde, 'pp')}; "
                + "; ".join(
                    f"a {qty(-float(size), 'pp')} effect needs ~{n} prompts per language"
                    for size, n in (power.prompts_needed or {}).items()
                    if n is not None
                )
                + "."
            )
    lines += _sensitivity_lines(s)
    lines += [
        "",
        "`*` fewer rows than min_count: shown, not used by the decomposition or verdicts.",
        "",
    ]
    return "\n".join(lines)


def write_tables(analysis_dir: Path) -> Path:
    """Write ``tables.md`` beside the ``summary.json`` of ``analysis_dir``; its path."""
    path = analysis_dir / TABLES
    path.write_text(render(load_summary(analysis_dir / SUMMARY)), encoding="utf-8")
    return path
