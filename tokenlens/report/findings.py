"""``FINDINGS.md``: the study's answer in prose, built only from its own output files.

The HTML reports show everything; FINDINGS.md is the short text one reads first or
pastes into an issue. So that every sentence can be checked against a file, it is
generated from ``summary.json`` (``tokenlens analyze``) and, when given, the rows of
``results.csv`` and ``bench.json`` (``tokenlens bench``): nothing is recomputed here
except orderings and maxima, and the only fixed prose is the scope section (what the
embedded CPU pair can and cannot say about Qwen3.5 with MTP / D-Flash on a GPU),
which is a statement about the setup, not a measurement.

Same input, same text: no dates, stable orderings, and every number and every piece
of Markdown goes through :mod:`tokenlens.format` (the one place for number formats,
language order and escaping), so a label cannot break a table or smuggle HTML into a
renderer, and a figure the data cannot support reads "not estimable (why)".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenlens.bench.tables import BenchGroup, is_baseline
from tokenlens.bench.tables import groups as bench_groups
from tokenlens.format import (
    HYPOTHESES,
    LANG_ORDER,
    MISSING,
    VERDICT_WORDS,
    code,
    interval,
    lang_name,
    lang_order,
    md,
    md_table,
    num,
    qty,
    rate_cell,
)
from tokenlens.format import finite as _finite
from tokenlens.signature import parse_signature

FINDINGS = "FINDINGS.md"

RULE_WORDS = {
    "yes": "yes: the whole interval lies below −δ",
    "no": "no: the whole interval lies above −δ",
    "unsure": "unsure: the interval reaches across −δ",
    "n/a": "no reading: the figure or its interval is missing",
}
FAMILY_NAMES = {"trained": "trained drafters", "training_free": "training-free (n-gram) drafters"}
PARTS = (
    ("composition", "shared composition"),
    ("within", "shared within"),
    ("out_of_support", "out of support"),
)
# (decomposition column, what it splits by)
DECOMPOSITIONS: tuple[tuple[str, str], ...] = (
    ("script", "script"),
    ("boundary", "morpheme boundary"),
    ("particle_type", "particle type"),
    ("rank_bucket", "BPE rank"),
)
TOP_CLASSES = 8


def languages(block: Mapping[str, Any] | None) -> list[str]:
    """Japanese and English first, then any other language alphabetically."""
    return lang_order(block or {})


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return md_table(header, rows)


# --- bench rows -----------------------------------------------------------------------------


def best_speedups(rows: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Per language, the speculative case with the highest tok/s speedup (the first in
    plan order on a tie); cases without a baseline to compare with are left out."""
    best: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        speedup = _finite(row.get("speedup_tok_s"))
        if row.get("method") == "none" or speedup is None:
            continue
        lang = str(row.get("lang"))
        if lang not in best or speedup > float(best[lang]["speedup_tok_s"]):
            best[lang] = row
    return {lang: best[lang] for lang in languages(best)}


def method_label(row: Mapping[str, Any]) -> str:
    """``draft k=3`` (the plan's method name and k), as Markdown."""
    return f"{md(row.get('method_label') or row.get('method'))} k={md(row.get('k'))}"


# --- sections -------------------------------------------------------------------------------


def findings_markdown(
    summary: Mapping[str, Any],
    bench_rows: Sequence[Mapping[str, Any]] | None = None,
    bench_info: Mapping[str, Any] | None = None,
) -> str:
    """The text of FINDINGS.md for an analysis ``summary`` (summary.json) and, when
    given, the bench's ``results.csv`` rows (:func:`tokenlens.bench.results.read_results`)
    and ``bench.json``."""
    lines: list[str] = []
    lines += _intro(summary, bench_rows)
    lines += _setup(summary)
    lines += _hypotheses(summary)
    lines += _acceptance(summary)
    lines += _gap(summary)
    lines += _explore(summary)
    lines += _speed(summary, bench_rows, bench_info)
    lines += _scope(summary)
    lines += _signatures(summary, bench_rows, bench_info)
    return "\n".join(lines).rstrip("\n") + "\n"


def write_findings(path: Path, analysis_dir: Path, bench_dir: Path | None = None) -> Path:
    """Write FINDINGS.md at ``path`` from ``analysis_dir/summary.json`` and, when
    ``bench_dir`` holds a results.csv, the bench. Returns ``path``."""
    from tokenlens.bench.results import BENCH_JSON, RESULTS_CSV, read_results

    summary = json.loads((analysis_dir / "summary.json").read_text("utf-8"))
    rows = info = None
    if bench_dir is not None and (bench_dir / RESULTS_CSV).is_file():
        rows = read_results(bench_dir / RESULTS_CSV)
        if (bench_dir / BENCH_JSON).is_file():
            info = json.loads((bench_dir / BENCH_JSON).read_text("utf-8"))
    path.write_text(findings_markdown(summary, rows, info), encoding="utf-8")
    return path


def _level(summary: Mapping[str, Any]) -> str:
    level = _finite((summary.get("settings") or {}).get("level"))
    return f"{level:.0%}" if level is not None else "95%"


def _intro(summary: Mapping[str, Any], bench_rows: Sequence[Mapping[str, Any]] | None) -> list[str]:
    settings = summary.get("settings") or {}
    sources = "the analysis (`summary.json`)"
    if bench_rows is not None:
        sources += " and the bench (`results.csv`, `bench.json`)"
    lines = [
        "# Findings: speculative decoding, Japanese vs English",
        "",
        f"Generated by tokenlens from {sources}; every number below is read from those "
        f"files. Brackets are {_level(summary)} intervals ({md(settings.get('interval', 't'))} "
        f"method) from a bootstrap that resamples whole {md(settings.get('cluster', 'prompts'))}s "
        f"({md(settings.get('bootstrap', MISSING))} replicates, seed "
        f"{md(settings.get('seed', MISSING))}). pp = percentage points of acceptance, "
        "Japanese minus English: negative means Japanese is worse. A figure the data "
        "cannot support is printed as *not estimable*, never as zero.",
        "",
    ]
    warnings = (summary.get("inputs") or {}).get("warnings") or []
    if warnings:
        lines += ["**Read with care:**", ""]
        lines += [f"- {md(w)}" for w in warnings]
        lines.append("")
    lines += ["## In short", ""]
    prompts = summary.get("prompts") or {}
    if prompts:
        lines.append(
            "- Prompts: "
            + ", ".join(f"{md(n)} {lang_name(lang)}" for lang, n in prompts.items())
            + f" (a verdict needs at least {md(settings.get('min_prompts', MISSING))} per "
            "language)."
        )
    acc = summary.get("acceptance") or {}
    for lang in languages(acc):
        stat = acc[lang]
        lines.append(
            f"- Acceptance of draft tokens, {lang_name(lang)}: {rate_cell(stat)} "
            f"({md(stat.get('n', MISSING))} draft tokens, all runs)."
        )
    for name, block in (summary.get("families") or {}).items():
        gap_j = block.get("gap_judged")
        if not gap_j:
            continue
        line = f"- Japanese − English, {FAMILY_NAMES.get(name, md(name))}, judged positions: "
        line += interval(gap_j, "pp")
        dec = block.get("confidence")
        if dec:
            line += "; by the target's confidence: " + ", ".join(
                f"{label} {interval(dec.get(part), 'pp')}" for part, label in PARTS
            )
        lines.append(line + ".")
    hyps = summary.get("hypotheses") or {}
    for key, name in HYPOTHESES.items():
        verdict = str((hyps.get(key) or {}).get("verdict", "inconclusive"))
        lines.append(f"- {key} ({name}): **{md(VERDICT_WORDS.get(verdict, verdict))}**.")
    need = _prompts_needed(summary)
    if need:
        lines.append(f"- {need}")
    if bench_rows is not None:
        for lang, row in best_speedups(bench_rows).items():
            lines.append(
                f"- Best measured speedup, {lang_name(lang)}: "
                f"{qty(row.get('speedup_tok_s'), 'speedup')} in tok/s, "
                f"{qty(row.get('speedup_chars_s'), 'speedup')} in chars/s "
                f"({method_label(row)}, corpus {md(row.get('corpus'))})."
            )
    return [*lines, ""]


def _prompts_needed(summary: Mapping[str, Any]) -> str:
    """How many prompts a verdict needs (the rule's minimum and the measured power)."""
    settings = summary.get("settings") or {}
    prompts = summary.get("prompts") or {}
    minimum = settings.get("min_prompts")
    have = min(prompts.values()) if prompts else None
    parts = []
    for key in HYPOTHESES:
        power = ((summary.get("hypotheses") or {}).get(key) or {}).get("power") or {}
        needed = power.get("prompts_needed") or {}
        sizes = [
            f"{num(float(size), 'pp').lstrip('+')} pp: ~{md(n)}" for size, n in needed.items() if n
        ]
        if sizes:
            parts.append(f"{key} effect of " + ", ".join(sizes))
    if not parts and (have is None or minimum is None or have >= minimum):
        return ""
    text = ""
    if have is not None and minimum is not None and have < minimum:
        text = (
            f"This study has {md(have)} prompts per language; the rules need "
            f"{md(minimum)} before they give any verdict. "
        )
    if parts:
        text += (
            "With the variability measured here, 80% power needs about (prompts per "
            "language) " + "; ".join(parts) + "."
        )
    return text


def _setup(summary: Mapping[str, Any]) -> list[str]:
    sig = parse_signature(str(summary.get("signature") or ""))
    lines = ["## What was measured", ""]
    for key, label in (
        ("model", "Target model"),
        ("draft", "Drafters"),
        ("method", "Methods"),
        ("k", "Draft tokens per step (k)"),
        ("tokenizer", "Tokenizer"),
        ("sampling", "Sampling"),
        ("vllm", "vLLM"),
    ):
        if key in sig:
            lines.append(f"- {label}: {code(sig[key])}")
    if len(lines) > 2:
        lines.append("")
    rows = []
    for run in summary.get("runs") or []:
        acc = run.get("acceptance") or {}
        rec = run.get("reconciliation") or {}
        if run.get("replayed"):
            checked = "derived (replayed)"
        else:
            checked = "yes" if rec.get("matches") else "**no**"
        rows.append(
            [
                code(run.get("label"), table=True),
                md(run.get("method")),
                md(run.get("k")),
                md(run.get("status")) + (" (replayed)" if run.get("replayed") else ""),
                *(md((acc.get(lang) or {}).get("requests", MISSING)) for lang in LANG_ORDER),
                *(rate_cell(acc.get(lang)) for lang in LANG_ORDER),
                interval(run.get("gap"), "pp"),
                checked,
            ]
        )
    if rows:
        lines += _table(
            [
                "run",
                "method",
                "k",
                "status",
                "JA prompts",
                "EN prompts",
                "JA acceptance",
                "EN acceptance",
                "JA − EN",
                "events = vLLM counters",
            ],
            rows,
        )
    return lines


def _hypotheses(summary: Mapping[str, Any]) -> list[str]:
    settings = summary.get("settings") or {}
    delta = _finite(settings.get("delta"))
    lines = [
        "## H1 and H2",
        "",
        "The verdicts follow the rules of docs/analysis.md (“Verdict rules”) with this "
        f"analysis' settings: threshold δ = {num(delta, 'pp').lstrip('+')} pp, at least "
        f"{md(settings.get('min_prompts', MISSING))} prompts per language. Each hypothesis "
        "reads one effect and one check, both on judged positions of the same runs; each "
        "asks whether Japanese is worse by more than δ. H1 is *supported* when the effect "
        "says yes and the check does not say no, *not supported* when the effect says no "
        "and the check does not say yes. H2 needs both: *supported* only when the effect "
        "and the check say yes, *not supported* when the check says no, or the effect says "
        "no and the check does not say yes. *No Japanese deficit*: Japanese is not worse at "
        "all, there is nothing to explain; otherwise *inconclusive*.",
        "",
    ]
    hyps = summary.get("hypotheses") or {}
    for key, name in HYPOTHESES.items():
        h = hyps.get(key) or {}
        verdict = str(h.get("verdict", "inconclusive"))
        lines += [f"### {key} ({name}): **{md(VERDICT_WORDS.get(verdict, verdict))}**", ""]
        effect = {
            "value": h.get("effect"),
            "ci_low": h.get("ci_low"),
            "ci_high": h.get("ci_high"),
            "not_estimable": h.get("not_estimable"),
        }
        if h.get("estimand"):
            family = FAMILY_NAMES.get(str(h.get("family")), md(h.get("family")))
            lines.append(
                f"- Effect ({md(h['estimand'])}; {family}): {interval(effect, 'pp')}"
                f"{_rule(h.get('reading'))}."
            )
        check = h.get("check")
        if check:
            lines.append(
                f"- Check ({md(check.get('name'))}): {interval(check, 'pp')}"
                f"{_rule(check.get('reading'))}."
            )
        power = h.get("power") or {}
        if power.get("mde") is not None:
            lines.append(
                "- Power: with this data an effect must be about "
                f"{qty(-float(power['mde']), 'pp')} or beyond to be found 80% of the time."
            )
        lines.append(f"- Evidence (summary.json): {md(h.get('evidence', MISSING))}")
        if h.get("caveat"):
            lines.append(f"- Caveat: {md(h['caveat'])}")
        lines.append("")
    return lines


def _rule(reading: Any) -> str:
    """How the verdict rule read an interval against −δ."""
    if reading is None:
        return ""
    return f" → {RULE_WORDS.get(str(reading), md(reading))}"


def _acceptance(summary: Mapping[str, Any]) -> list[str]:
    acc = summary.get("acceptance") or {}
    judged = summary.get("acceptance_judged") or {}
    per_step = summary.get("text_per_step") or {}
    rows = []
    for lang in languages(acc):
        text = per_step.get(lang) or {}
        rows.append(
            [
                lang_name(lang),
                rate_cell(acc[lang]),
                md(acc[lang].get("n", MISSING)),
                md(acc[lang].get("requests", MISSING)),
                rate_cell(judged.get(lang)),
                md((judged.get(lang) or {}).get("n", MISSING)),
                interval(text.get("accepted_tokens"), "per_step"),
                interval(text.get("accepted_chars"), "per_step"),
            ]
        )
    if not rows:
        return ["## Acceptance per language", "", "No acceptance figures in the summary.", ""]
    return [
        "## Acceptance per language",
        "",
        "All draft tokens (vLLM's acceptance rate) and judged positions (every accepted "
        "draft and the first rejection of each step: the rows the class breakdowns use), "
        "pooled over all runs. Prompts count distinct prompts.",
        "",
        *_table(
            [
                "language",
                "acceptance",
                "draft tokens",
                "prompts",
                "judged-position rate",
                "judged rows",
                "accepted tokens / step",
                "accepted characters / step",
            ],
            rows,
        ),
        f"`*` fewer than {md((summary.get('settings') or {}).get('min_count', MISSING))} "
        "rows (sparse).",
        "",
    ]


def _split_row(label: str, dec: Mapping[str, Any], notes: list[str]) -> list[str]:
    """One row of the split table; a split the data cannot support gets a numbered note
    with the reason instead of three copies of it."""
    support = dec.get("support") or {}
    if dec.get("not_estimable"):
        notes.append(f"{label}: {md(dec['not_estimable'])}")
        parts = [f"not estimable ({len(notes)})"] * len(PARTS)
    else:
        parts = [interval(dec.get(part), "pp") for part, _ in PARTS]
    return [
        label,
        md((dec.get("gap") or {}).get("n", MISSING)),
        interval(dec.get("gap"), "pp"),
        *parts,
        num(1.0 - support["share_ja"], "share") if "share_ja" in support else MISSING,
        num(1.0 - support["share_en"], "share") if "share_en" in support else MISSING,
    ]


SPLIT_HEADER = (
    "split by",
    "rows",
    "gap",
    "shared composition",
    "shared within",
    "out of support",
    "JA rows out of support",
    "EN rows out of support",
)


def _gap(summary: Mapping[str, Any]) -> list[str]:
    lines = ["## The Japanese − English gap", ""]
    families = summary.get("families") or {}
    gap = summary.get("gap")
    if not gap and not families:
        return [*lines, "Not computed: the analysis needs both Japanese and English runs.", ""]
    lines += [
        "gap = shared composition + shared within + out of support (docs/analysis.md). In "
        "the classes both languages fill, *composition* is Japanese having more of the "
        "positions that are hard for the drafter and *within* is the same class being "
        "harder in Japanese; *out of support* is what rows in classes only one language "
        "fills add, and it is evidence for neither hypothesis. Each drafter family is "
        "split on its own: pooling them would turn each method's share of rows into "
        "composition.",
        "",
    ]
    rows: list[list[str]] = []
    notes: list[str] = []
    for name, block in families.items():
        if block.get("confidence"):
            label = f"target's confidence, {FAMILY_NAMES.get(name, md(name))}"
            rows.append(_split_row(label, block["confidence"], notes))
    contrast = summary.get("h2_contrast")
    if gap:
        family = FAMILY_NAMES.get(str(gap.get("family")), md(gap.get("family")))
        lines += [
            f"- All draft tokens ({family}): {interval(gap.get('overall'), 'pp')} "
            f"({md((gap.get('overall') or {}).get('n', MISSING))} draft tokens).",
            f"- Judged positions ({family}): {interval(gap.get('judged'), 'pp')} "
            f"({md((gap.get('judged') or {}).get('n', MISSING))} rows).",
            f"- Relative, judged positions (Japanese rate / English rate − 1): "
            f"{interval(gap.get('relative_judged'), 'pct')}.",
        ]
        if contrast:
            lines.append(
                "- Within-confidence gap, trained minus training-free drafters (H2's "
                f"effect): {interval(contrast.get('difference'), 'pp')}."
            )
        lines.append("")
        decs = gap.get("decomposition") or {}
        for column, label in DECOMPOSITIONS:
            if column in decs:
                rows.append(_split_row(f"{label}, {family}", decs[column], notes))
    if rows:
        lines += _table(SPLIT_HEADER, rows)
    if notes:
        lines += [f"Not estimable: ({i}) {note}." for i, note in enumerate(notes, 1)]
        lines.append("")
    return lines


def _explore(summary: Mapping[str, Any]) -> list[str]:
    explore = (summary.get("gap") or {}).get("explore") or {}
    classes = explore.get("classes") or []
    if not classes:
        return []
    shown = classes[:TOP_CLASSES]
    rows = [
        [
            FAMILY_NAMES.get(str(c.get("family")), md(c.get("family"))),
            md(c.get("by")),
            md(c.get("class")),
            md(c.get("rows_ja")),
            md(c.get("rows_en")),
            num(c.get("rate_ja"), "rate"),
            num(c.get("rate_en"), "rate"),
            interval(c.get("difference"), "pp"),
            num((c.get("difference") or {}).get("p_adjusted"), "rate"),
        ]
        for c in shown
    ]
    more = len(classes) - len(shown)
    return [
        "## Where it concentrates (exploratory)",
        "",
        f"Japanese − English acceptance within each class that both languages fill, "
        f"the {len(shown)} largest of {md(explore.get('comparisons'))} comparisons"
        + (f" ({more} more in summary.json)" if more > 0 else "")
        + ". Exploratory: the intervals are Bonferroni-adjusted for all comparisons "
        f"(level {num(explore.get('level'), 'rate')}) and the p-values Holm-adjusted; "
        "the verdicts do not read them.",
        "",
        *_table(
            [
                "family",
                "by",
                "class",
                "JA rows",
                "EN rows",
                "JA rate",
                "EN rate",
                "JA − EN (adjusted interval)",
                "Holm p",
            ],
            rows,
        ),
    ]


def _speed(
    summary: Mapping[str, Any],
    bench_rows: Sequence[Mapping[str, Any]] | None,
    bench_info: Mapping[str, Any] | None,
) -> list[str]:
    lines = ["## Speed", ""]
    if bench_rows is None:
        lines += [
            "No bench results were given (`tokenlens bench` was not run), so speed comes "
            "only from the model of the traced runs below.",
            "",
        ]
    else:
        lines += _bench(bench_rows, bench_info or {})
    lines += _speed_model(summary)
    return lines


def _bench(rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> list[str]:
    plan = info.get("plan") or {}
    lines = ["### Measured (bench)", ""]
    if plan.get("name"):
        description = f": {md(plan['description'])}" if plan.get("description") else ""
        lines += [f"Plan {code(plan['name'])}{description}", ""]
    done, total = info.get("cases_done"), info.get("cases_total")
    if isinstance(done, int) and isinstance(total, int) and done < total:
        lines += [f"**Partial**: {done} of {total} cases measured.", ""]
    if not rows:
        return [*lines, "The bench has no measured cases yet.", ""]
    lines += [
        "Output tokens and characters per second (median over the repeats) and their "
        "speedup over the baseline (no speculation) of the same model and language; acc "
        "is vLLM's acceptance rate.",
        "",
    ]
    for group in bench_groups(dict(r) for r in rows):
        lines += _bench_group(BenchGroup(group))
    others = sorted({str(r.get("lang")) for r in rows} - set(LANG_ORDER))
    if others:
        lines += [f"Other languages in results.csv: {md(', '.join(others))} (see results.md).", ""]
    return lines


def _bench_group(group: BenchGroup) -> list[str]:
    table = []
    wins = {"ja": 0, "en": 0}
    for variant in group.variants:

        def cell(lang: str, column: str, v: dict[str, Any] = variant) -> Any:
            return group.get(v, lang, column)

        table.append(
            [
                md(variant.get("method_label") or variant.get("method")),
                md(variant.get("k")),
                num(cell("ja", "tok_s"), "throughput"),
                num(cell("en", "tok_s"), "throughput"),
                qty(cell("ja", "speedup_tok_s"), "speedup"),
                qty(cell("en", "speedup_tok_s"), "speedup"),
                num(cell("ja", "chars_s"), "throughput"),
                num(cell("en", "chars_s"), "throughput"),
                qty(cell("ja", "speedup_chars_s"), "speedup"),
                qty(cell("en", "speedup_chars_s"), "speedup"),
                num(cell("ja", "acceptance_rate"), "rate"),
                num(cell("en", "acceptance_rate"), "rate"),
            ]
        )
        s_ja = _finite(cell("ja", "speedup_tok_s"))
        s_en = _finite(cell("en", "speedup_tok_s"))
        if not is_baseline(variant) and s_ja is not None and s_en is not None and s_ja != s_en:
            wins["en" if s_en > s_ja else "ja"] += 1
    lines = [f"#### {group.label}", ""]
    lines += _table(
        [
            "method",
            "k",
            "JA tok/s",
            "EN tok/s",
            "JA speedup (tok/s)",
            "EN speedup (tok/s)",
            "JA chars/s",
            "EN chars/s",
            "JA speedup (chars/s)",
            "EN speedup (chars/s)",
            "JA acc",
            "EN acc",
        ],
        table,
    )
    compared = wins["ja"] + wins["en"]
    if compared:
        lines += [
            f"English gains more (tok/s speedup) than Japanese for {wins['en']} of "
            f"{compared} speculative setups compared, Japanese more for {wins['ja']}.",
            "",
        ]
    if group.duplicates:
        dupes = ", ".join(str(row.get("case_id")) for row, _ in group.duplicates)
        lines += [f"Not shown (same method, k and language twice): {md(dupes)}.", ""]
    return lines


def _speed_model(summary: Mapping[str, Any]) -> list[str]:
    rows = []
    for run in summary.get("runs") or []:
        speed = run.get("speed") or {}
        source = md(speed.get("draft_cost_source", MISSING))
        by_lang = speed.get("by_lang") or {}
        for lang in languages(by_lang):
            m = by_lang[lang]
            rows.append(
                [
                    code(run.get("label"), table=True),
                    lang_name(lang),
                    md(m.get("traced_k", MISSING)),
                    num(m.get("measured_tokens_per_step"), "per_step"),
                    f"{num(m.get('draft_cost'), 'cost')} ({source})",
                    md(m.get("recommended_k")) if m.get("recommended_k") else "none (c assumed)",
                    qty(m.get("recommended_speedup"), "speedup"),
                ]
            )
    if not rows:
        return []
    return [
        "### Modelled from the traced runs",
        "",
        "tokens/step = 1 + accepted / drafts, measured; the model's speedup is "
        "tokens/step / (1 + k·c) with draft cost c relative to a target step "
        "(docs/analysis.md, “Speed model”), so it is only as good as c: a best k is "
        "given only when c was measured (a bench or --draft-cost), never from an "
        "assumed default.",
        "",
        *_table(
            [
                "run",
                "language",
                "traced k",
                "tokens / step",
                "draft cost c (source)",
                "best k (model)",
                "modelled speedup",
            ],
            rows,
        ),
    ]


# --- scope: fixed prose about the setup, not data ------------------------------------------

_SCOPE_EMBEDDED = (
    "The embedded pair is a stand-in that runs on a laptop; it can say some things about "
    "Qwen3.5 with MTP or D-Flash on a GPU and not others.",
    "- **Tokenizer.** The pair uses the Qwen2/Qwen2.5 byte-level BPE (151,643 ranks plus "
    "the Qwen2.5 special tokens, `qwen2.5` in tokenlens/text/tokenizers.py). Qwen3.5 uses a "
    "different, larger byte-level BPE of the same family (`qwen3.5`: 248,044 ranks + 33 "
    "specials, continuing the same special-token order). Japanese text splits into "
    "different tokens under the two, so the class shares behind the composition part (H1) "
    "are Qwen2.5's. `tokenlens tokens --tokenizer qwen3.5` measures the tokenizer side for "
    "Qwen3.5 without a model.",
    "- **Drafters.** The drafters here are n-gram prompt lookup (it learns nothing) and a "
    "separate 0.5B model of the same family. There is no MTP head and no D-Flash drafter: "
    "those are trained for their target and read its hidden states, so how much Japanese "
    "they lose can differ from what a stand-alone small model loses. H2 here is about the "
    "0.5B drafter of a coder model, not about them.",
    "- **Hardware.** vLLM runs on the CPU, where verifying k + 1 tokens and running a "
    "separate 0.5B drafter cost a different share of a step than on a GPU, and an MTP head "
    "is a small part of the target rather than a separate model. Measured speedups and the "
    "best k therefore do not carry over; acceptance rates, which do not depend on the "
    "hardware, carry over better.",
    "- **Sample size.** A few prompts per language give wide intervals; below the rules' "
    "minimum the honest answer is *insufficient data*, not a failure. docs/analysis.md "
    "says how much data the rules need.",
    "{decoding}",
    "- **Rules.** The verdicts are those of the rules in docs/analysis.md applied to these "
    "intervals; the same rules on a GPU study of Qwen3.5 would answer for that setup.",
)
_GREEDY = (
    "- **Decoding.** The runs decode greedily (Sampling above): a draft token is accepted "
    "when it equals the target's top token. Under sampling, vLLM's rejection sampling "
    "accepts by probability, and the gap can differ."
)
_SAMPLED = (
    "- **Decoding.** The runs sample (Sampling above): vLLM's rejection sampling accepts a "
    "draft token by probability, so acceptance depends on how flat the target's "
    "distribution is, and greedy runs can show a different gap."
)

_SCOPE_OTHER = """\
These runs are not the embedded demo pair; how far they speak for another model, \
drafter or machine is limited by the same things: the tokenizer (class shares are \
the runs' tokenizer's), the drafter (MTP heads and D-Flash drafters are trained for \
their target and read its hidden states, unlike a stand-alone draft model), the \
hardware (verification cost and so speedups and the best k differ between CPU and \
GPU; acceptance rates carry over better), the sample size (few prompts give wide \
intervals and honest *insufficient data* verdicts) and the decoding (greedy acceptance is \
an exact match; under sampling vLLM accepts by probability). The verdicts are those \
of the rules in docs/analysis.md."""


def _is_embedded(summary: Mapping[str, Any]) -> bool:
    """The analysed runs' target is the embedded demo model (by the signature)."""
    from tokenlens.models.embedded import TARGET

    model = parse_signature(str(summary.get("signature") or "")).get("model", "")
    return model.split("@")[0] == TARGET.key


def _scope(summary: Mapping[str, Any]) -> list[str]:
    title = "## What this can and cannot say about Qwen3.5 with MTP or D-Flash on a GPU"
    if not _is_embedded(summary):
        return [title, "", _SCOPE_OTHER, ""]
    sampling = parse_signature(str(summary.get("signature") or "")).get("sampling", "")
    decoding = _GREEDY if sampling.startswith("greedy") else _SAMPLED
    paragraphs = [decoding if p == "{decoding}" else p for p in _SCOPE_EMBEDDED]
    return [title, "", paragraphs[0], "", *paragraphs[1:], ""]


def _signatures(
    summary: Mapping[str, Any],
    bench_rows: Sequence[Mapping[str, Any]] | None,
    bench_info: Mapping[str, Any] | None,
) -> list[str]:
    lines = ["## Signatures", "", f"- analysis: {code(summary.get('signature') or MISSING)}"]
    for run in summary.get("runs") or []:
        if run.get("signature"):
            lines.append(f"- run {code(run.get('label'))}: {code(run['signature'])}")
    if bench_rows is not None:
        lines.append(f"- bench: {code((bench_info or {}).get('signature') or MISSING)}")
    return [*lines, ""]
