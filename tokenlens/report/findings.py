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

from tokenlens.analysis.summary_file import (
    Check,
    Family,
    Hypothesis,
    Rate,
    RunSummary,
    Split,
    Summary,
    Support,
    load_summary,
    parse_summary,
)
from tokenlens.analysis.tables import COLUMN_WORDS
from tokenlens.analysis.wording import runs_phrase
from tokenlens.bench.results_md import BenchGroup, is_baseline
from tokenlens.bench.results_md import groups as bench_groups
from tokenlens.format import (
    HYPOTHESES,
    LANG_ORDER,
    MISSING,
    VERDICT_WORDS,
    code,
    decision_prose,
    interval,
    lang_name,
    lang_order,
    md,
    md_table,
    num,
    or_missing,
    qty,
    rate_cell,
)
from tokenlens.format import finite as _finite
from tokenlens.signature import parse_signature

FINDINGS = "FINDINGS.md"

RULE_WORDS = {
    "yes": "yes: the whole decision interval lies below −δ",
    "no": "no: the whole decision interval lies above −δ",
    "unsure": "unsure: the decision interval reaches across −δ",
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
    return {lang: best[lang] for lang in lang_order(best)}


def method_label(row: Mapping[str, Any]) -> str:
    """``draft k=3`` (the plan's method name and k), as Markdown."""
    return f"{md(row.get('method_label') or row.get('method'))} k={md(row.get('k'))}"


# --- sections -------------------------------------------------------------------------------


def findings_markdown(
    summary: Summary | Mapping[str, Any],
    bench_rows: Sequence[Mapping[str, Any]] | None = None,
    bench_info: Mapping[str, Any] | None = None,
    checks: Sequence[Mapping[str, Any]] | None = None,
) -> str:
    """The text of FINDINGS.md for an analysis ``summary`` (summary.json, parsed or
    not) and, when given, the bench's ``results.csv`` rows
    (:func:`tokenlens.bench_results.read_results`), ``bench.json``, and the checks
    of replayed runs against real traces (a study's ``replay/check.json``)."""
    s = parse_summary(summary)
    lines: list[str] = []
    lines += _intro(s, bench_rows)
    lines += _setup(s, checks)
    lines += _hypotheses(s)
    lines += _positions(s)
    lines += _acceptance(s)
    lines += _gap(s)
    lines += _classes(s)
    lines += _explore(s)
    lines += _rejections(s)
    lines += _domains(s)
    lines += _speed(s, bench_rows, bench_info)
    lines += _scope(s)
    lines += _signatures(s, bench_rows, bench_info)
    return "\n".join(lines).rstrip("\n") + "\n"


def write_findings(
    path: Path,
    analysis_dir: Path,
    bench_dir: Path | None = None,
    checks: Sequence[Mapping[str, Any]] | None = None,
) -> Path:
    """Write FINDINGS.md at ``path`` from ``analysis_dir/summary.json`` and, when
    ``bench_dir`` holds a results.csv, the bench. Returns ``path``."""
    from tokenlens.bench_results import BENCH_JSON, RESULTS_CSV, read_results

    summary = load_summary(analysis_dir)
    rows = info = None
    if bench_dir is not None and (bench_dir / RESULTS_CSV).is_file():
        rows = read_results(bench_dir / RESULTS_CSV)
        if (bench_dir / BENCH_JSON).is_file():
            info = json.loads((bench_dir / BENCH_JSON).read_text("utf-8"))
    path.write_text(findings_markdown(summary, rows, info, checks), encoding="utf-8")
    return path


def _family(name: str | None) -> str:
    return FAMILY_NAMES.get(str(name), md(name))


def _intro(s: Summary, bench_rows: Sequence[Mapping[str, Any]] | None) -> list[str]:
    settings = s.settings
    sources = "the analysis (`summary.json`)"
    if bench_rows is not None:
        sources += " and the bench (`results.csv`, `bench.json`)"
    level = _finite(settings.level)
    lines = [
        "# Findings: speculative decoding, Japanese vs English",
        "",
        f"Generated by tokenlens from {sources}; every number below is read from those "
        f"files. Brackets are {f'{level:.0%}' if level is not None else '95%'} intervals "
        f"({md(settings.interval or 't')} method) from a bootstrap that resamples whole "
        f"{md(settings.cluster or 'prompts')}s ({md(or_missing(settings.bootstrap))} "
        f"replicates, seed {md(or_missing(settings.seed))}). pp = percentage points of "
        "acceptance, Japanese minus English: negative means Japanese is worse. A figure "
        "the data cannot support is printed as *not estimable*, never as zero.",
        "",
    ]
    if s.warnings:
        lines += ["**Read with care:**", ""]
        lines += [f"- {md(w)}" for w in s.warnings]
        lines.append("")
    lines += ["## In short", ""]
    if s.prompts:
        lines.append(
            "- Prompts: "
            + ", ".join(f"{md(n)} {lang_name(lang)}" for lang, n in s.prompts.items())
            + f" (a verdict needs at least {md(or_missing(settings.min_prompts))} per "
            "language)."
        )
    lines += _short_acceptance(s)
    for name, family in s.families.items():
        if family.gap_judged is None:
            continue
        line = (
            f"- Japanese − English, {_family(name)} ({md(runs_phrase(family.configurations))}), "
            "judged positions: "
        )
        line += interval(family.gap_judged, "pp")
        if family.confidence is not None:
            line += "; by the target's confidence: " + ", ".join(
                f"{label} {interval(family.confidence.part(part), 'pp')}" for part, label in PARTS
            )
        lines.append(line + ".")
    for key, name in HYPOTHESES.items():
        verdict = _verdict(s, key)
        h = s.hypotheses.get(key) or Hypothesis()
        line = f"- {key} ({name}): **{md(VERDICT_WORDS.get(verdict, verdict))}**."
        if h.statement and verdict not in ("insufficient_data",):
            line += f" {md(h.statement)}"
        sens = sensitivity_words(h)
        if sens:
            line += f" {sens[0].upper()}{sens[1:]}"
        lines.append(line)
    lines += _short_rejections(s)
    lines += _short_domains(s)
    need = _prompts_needed(s)
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


def _short_acceptance(s: Summary) -> list[str]:
    """vLLM's acceptance, per drafter family: the range over its runs (each run's rate is
    in the table below; a rate pooled over k or over families would describe no
    configuration), and the judged-position rate the verdicts read."""
    lines = []
    for name, family in s.families.items():
        runs = [r for r in s.runs if r.label in family.runs]
        parts = []
        for lang in LANG_ORDER:
            rates = [r.acceptance[lang] for r in runs if r.acceptance.get(lang) is not None]
            values = [x.rate for x in rates if x.rate is not None]
            if not values:
                continue
            if len(values) == 1:
                parts.append(f"{lang_name(lang)} {rate_cell(rates[0])}")
            else:
                parts.append(
                    f"{lang_name(lang)} {num(min(values), 'rate')} to {num(max(values), 'rate')}"
                )
        if not parts:
            continue
        configs = md(runs_phrase(family.configurations))
        judged = [
            f"{lang_name(lang)} {rate_cell(family.acceptance_judged[lang])}"
            for lang in lang_order(family.acceptance_judged)
        ]
        line = f"- Acceptance of draft tokens (vLLM's rate), {_family(name)}, {configs}: "
        line += ", ".join(parts)
        line += " (per run in the table below)" if len(runs) > 1 else ""
        if judged:
            line += (
                "; judged positions"
                + (", pooled over those runs as the verdicts read them" if len(runs) > 1 else "")
                + ": "
                + ", ".join(judged)
            )
        lines.append(line + ".")
    if not lines:  # an analysis without families (one language, or an old summary)
        for lang in lang_order(s.acceptance):
            stat = s.acceptance[lang]
            lines.append(
                f"- Acceptance of draft tokens, {lang_name(lang)}: {rate_cell(stat)} "
                f"({md(or_missing(stat.n))} draft tokens)."
            )
    return lines


def sensitivity_words(h: Hypothesis) -> str:
    """How the verdict moves: the δ where it flips, on vLLM's all-draft-token gap, per
    k, and under the first rules' 95% reading (the rule changed after calibration)."""
    sens = h.sensitivity
    if sens is None or sens.not_computed:
        return ""
    parts = []
    for side, word in ((sens.flip_below, "below"), (sens.flip_above, "above")):
        if side is not None:
            parts.append(f"δ {word} {100 * side[0]:.2f} pp: {_words(side[1])}")
    if not parts:
        parts.append("any δ up to 50 pp: the same")
    text = "it would read, at " + "; at ".join(parts)
    text += f"; on vLLM's all-draft-token gap: {_words(sens.all_tokens)}"
    if sens.per_k:
        per = ", ".join(f"k = {k}: {_words(e.verdict)}" for k, e in sens.per_k.items())
        text += f"; each k alone: {per}"
    changed = sens.previous is not None and sens.previous != h.verdict
    text += f"; under the first rules' 95% reading: {_words(sens.previous)}" + (
        f", not {_words(h.verdict)}: the rules were changed to the 90% decision interval "
        "after the test bed's power was seen, and that change decides this verdict."
        if changed
        else " (the rules were changed to the 90% decision interval after the test bed's "
        "power was seen; this verdict does not depend on it)."
    )
    return text


def _words(verdict: str | None) -> str:
    return md(VERDICT_WORDS.get(str(verdict), str(verdict)))


def _short_rejections(s: Summary) -> list[str]:
    lines = []
    for name, fam in s.rejections.items():
        split = fam.shares.get("split") or {}
        if not all(lang in split for lang in LANG_ORDER):
            continue
        lines.append(
            f"- Rejections where the drafter proposed the target's very text, cut into "
            f"tokens differently (split disagreements), {_family(name)}: "
            + ", ".join(
                f"{lang_name(lang)} {interval(split[lang], 'share', 'share')}"
                for lang in LANG_ORDER
            )
            + f" of rejections; JA − EN {interval(fam.split_gap, 'pp')}."
        )
    return lines


def _short_domains(s: Summary) -> list[str]:
    lines = []
    for name, fam in s.domains.items():
        for domain in fam.departures:
            g = fam.domains[domain]
            lines.append(
                f"- **Domain {md(domain)} departs from the pooled reading** ({_family(name)}): "
                f"judged gap {interval(g, 'pp')} over {md(g.pairs)} pairs, "
                f"Bonferroni-adjusted decision interval {num(g.adjusted_low, 'pp')} to "
                f"{qty(g.adjusted_high, 'pp')} (reads {md(g.reading)} against −δ; pooled: "
                f"{md(fam.pooled_reading)})."
            )
        for domain in fam.concerns:
            g = fam.domains[domain]
            lines.append(
                f"- Domain {md(domain)} ({_family(name)}) does not share the pooled "
                f"reading: judged gap {interval(g, 'pp')} over {md(g.pairs)} pairs; its "
                f"Bonferroni-adjusted decision interval {num(g.adjusted_low, 'pp')} to "
                f"{qty(g.adjusted_high, 'pp')} reaches across −δ, so neither a deficit "
                "beyond δ nor its absence is shown for it."
            )
        het = fam.heterogeneity
        if het is not None and het.p is not None and het.p < 0.05:
            lines.append(
                f"- The domains differ ({_family(name)}): between-domain spread of the "
                f"judged gap {qty(het.spread, 'pp').lstrip('+')} against "
                f"{qty(het.chance_spread, 'pp').lstrip('+')} by chance, permutation p = "
                f"{num(het.p, 'rate')}: a pooled verdict may not hold in every domain."
            )
    return lines


def _verdict(s: Summary, key: str) -> str:
    h = s.hypotheses.get(key)
    return "inconclusive" if h is None or h.verdict is None else h.verdict


def _prompts_needed(s: Summary) -> str:
    """How many prompts a verdict needs (the rule's minimum and the measured power)."""
    minimum = s.settings.min_prompts
    have = min(s.prompts.values()) if s.prompts else None
    parts = []
    for key in HYPOTHESES:
        h = s.hypotheses.get(key)
        needed = h.power.prompts_needed if h is not None and h.power is not None else {}
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
    return text.strip()


def _setup(s: Summary, checks: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    sig = parse_signature(s.signature or "")
    lines = ["## What was measured", ""]
    lines += _provenance(s, checks)
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
    for run in s.runs:
        checked = "derived (replayed)" if run.replayed else "yes" if run.reconciled else "**no**"
        acc = run.acceptance
        rows.append(
            [
                code(run.label, table=True),
                md(run.method),
                md(run.k),
                md(run.status) + (" (replayed)" if run.replayed else ""),
                *(md(or_missing(_requests(acc.get(lang)))) for lang in LANG_ORDER),
                *(rate_cell(acc.get(lang)) for lang in LANG_ORDER),
                interval(run.gap, "pp"),
                checked,
            ]
        )
    if rows:
        lines += md_table(
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


def _provenance(s: Summary, checks: Sequence[Mapping[str, Any]] | None) -> list[str]:
    """Where the numbers come from: the weights, the dtype, which runs are replays of
    which trace, and how the replays were checked against real traces."""
    lines = []
    models: dict[str, str] = {}
    for run in s.runs:
        for m in run.models:
            models.setdefault(str(m.get("role") or m.get("key")), str(m.get("weights")))
    for role, weights in models.items():
        lines.append(f"- Weights, {md(role)}: {md(weights)}.")
    dtypes = sorted({run.dtype.removeprefix("torch.") for run in s.runs if run.dtype})
    if dtypes:
        lines.append(f"- Computed in: {md(', '.join(dtypes))}.")
    replayed = [run for run in s.runs if run.replayed]
    by_source: dict[str, list[RunSummary]] = {}
    for run in replayed:
        by_source.setdefault(run.replay_source or run.replayed_from or "?", []).append(run)
    traced = [run for run in s.runs if not run.replayed]
    for source, runs in by_source.items():
        everything = " (all the analysed runs)" if not traced and len(by_source) == 1 else ""
        lines.append(
            f"- {len(runs)} runs{everything} are replays (`tokenlens replay`, docs/replay.md) "
            f"of one real trace, {code(source)}: "
            + ", ".join(code(r.label) for r in runs)
            + ". Their counters are derived from their events, not vLLM's."
        )
    if traced:
        lines.append(
            "- Traced (real vLLM runs, events reconciled with vLLM's counters): "
            + ", ".join(code(r.label) for r in traced)
            + "."
        )
    if replayed:
        lines += _checks(replayed, checks)
    if lines:
        lines.append("")
    return lines


def _checks(
    replayed: Sequence[RunSummary], checks: Sequence[Mapping[str, Any]] | None
) -> list[str]:
    """One line per replayed method: checked against a real trace, or not."""
    done = {str(c.get("replayed")): c for c in checks or ()}
    lines = []
    for c in done.values():
        rows, equal = c.get("rows_traced"), c.get("equal_judged")
        same = rows == equal and c.get("rows_replayed") == rows
        lines.append(
            f"- Check: the real trace {code(c.get('traced'))} against the replayed "
            f"{code(c.get('replayed'))}: {md(or_missing(equal))} of {md(or_missing(rows))} event "
            "rows equal where the replay knows the draft"
            + (
                " (every row)"
                if same
                else f"; {md(len(c.get('differing_requests') or []))} requests differ"
            )
            + f"; acceptance {num(c.get('acceptance_traced'), 'rate')} traced, "
            f"{num(c.get('acceptance_replayed'), 'rate')} replayed (replay/check.json)."
        )
    methods = sorted({str(r.method) for r in replayed})
    checked = {str(c.get("replayed")).rsplit("-k", 1)[0] for c in done.values()}
    for method in methods:
        if method not in checked:
            lines.append(
                f"- The {md(method)} replays were not checked against a real {md(method)} "
                "trace in this study."
            )
    return lines


def _requests(rate: Rate | None) -> int | None:
    return rate.requests if rate is not None else None


def _hypotheses(s: Summary) -> list[str]:
    delta = _finite(s.settings.delta)
    lines = [
        "## H1 and H2",
        "",
        "The verdicts follow the rules of docs/analysis.md (“Verdict rules”) with this "
        f"analysis' settings: threshold δ = {num(delta, 'pp').lstrip('+')} pp, at least "
        f"{md(or_missing(s.settings.min_prompts))} prompts per language. Each hypothesis "
        "reads one effect and one check, both on judged positions of the same runs; each "
        f"asks whether Japanese is worse by more than δ, {_level_words(s)}. H1 is "
        "*supported* when the effect says yes and the check does not say no, *not "
        "supported* when the effect says no and the check does not say yes. H2 needs "
        "both: *supported* only when the effect and the check say yes, *not supported* "
        "when the check says no, or the effect says no and the check does not say yes. "
        "*No Japanese deficit* is read first, on the family's judged gap: its decision "
        "interval lies above −δ, so Japanese is not worse than English by more than δ (a "
        "smaller deficit is not ruled out) and there is no deficit beyond the margin to "
        "explain. Anything else is *inconclusive*."
        + (
            " δ and the rules are frozen: the analysis signature names them "
            f"({code('rules:' + s.settings.rules_hash)})."
            if s.settings.rules_hash
            else ""
        ),
        "",
    ]
    for key, name in HYPOTHESES.items():
        h = s.hypotheses.get(key) or Hypothesis()
        verdict = _verdict(s, key)
        lines += [f"### {key} ({name}): **{md(VERDICT_WORDS.get(verdict, verdict))}**", ""]
        if h.statement and verdict != "insufficient_data":
            lines.append(f"- Reading: {md(h.statement)}")
        if h.estimand:
            lines.append(
                f"- Effect ({md(h.estimand)}; {_family(h.family)}): "
                f"{interval(h.effect_estimate, 'pp')}{_decision(s, h)}{_rule(h.reading)}."
            )
        if h.check is not None:
            lines.append(
                f"- Check ({md(h.check.name)}): {interval(h.check, 'pp')}"
                f"{_decision(s, h.check)}{_rule(h.check.reading)}."
            )
        if h.power is not None and h.power.mde is not None:
            rule = f" ({md(h.power.rule)})" if h.power.rule else ""
            at = "; ".join(
                f"a {qty(-float(size), 'pp')} effect is found {num(value, 'share')} of the time"
                for size, value in h.power.power_at.items()
                if value is not None
            )
            lines.append(
                "- Power: with this data an effect must be about "
                f"{qty(-float(h.power.mde), 'pp')} or beyond to be found 80% of the time"
                f"{rule}" + (f"; {at}" if at else "") + "."
            )
        sens = sensitivity_words(h)
        if sens:
            lines.append(f"- Sensitivity: {sens}")
        lines.append(f"- Evidence (summary.json): {md(or_missing(h.evidence))}")
        if h.caveat:
            lines.append(f"- Caveat: {md(h.caveat)}")
        lines.append("")
    return lines


def _decision(s: Summary, fig: Hypothesis | Check) -> str:
    """`` (90% decision interval: -9.5 to -2.9 pp)``: the interval the rule read."""
    text = decision_prose(fig.decision_low, fig.decision_high, s.settings.decision_level)
    return f" ({text})" if text else ""


def _level_words(s: Summary) -> str:
    """How a reading is decided: on the decision interval (a one-sided test at α), or on
    the 95% interval for a summary written before decision intervals."""
    alpha = s.settings.alpha
    if alpha is None:
        return "read on the 95% interval"
    return (
        f"read on the {100 * (1 - 2 * alpha):g}% decision interval (a one-sided test at "
        f"{100 * alpha:g}% against δ; figures are shown with their 95% intervals)"
    )


def _rule(reading: str | None) -> str:
    """How the verdict rule read an interval against −δ."""
    if reading is None:
        return ""
    return f" → {RULE_WORDS.get(str(reading), md(reading))}"


def _acceptance(s: Summary) -> list[str]:
    """vLLM's rate and the judged rate per language, when the summary's per-language
    sections cover one run configuration (summary.json ``scope``): over several k they
    would pool what depends on k, and the per-run table above replaces them."""
    scope = s.scope
    if scope is not None and len(scope.configurations) > 1:
        return _family_table(s)
    rows = []
    for lang in lang_order(s.acceptance):
        acc = s.acceptance[lang]
        judged = s.acceptance_judged.get(lang)
        text = s.text_per_step.get(lang) or {}
        rows.append(
            [
                lang_name(lang),
                rate_cell(acc),
                md(or_missing(acc.n)),
                md(or_missing(acc.requests)),
                rate_cell(judged),
                md(or_missing(judged.n if judged is not None else None)),
                interval(text.get("accepted_tokens"), "per_step"),
                interval(text.get("accepted_chars"), "per_step"),
            ]
        )
    if not rows:
        return ["## Acceptance per language", "", "No acceptance figures in the summary.", ""]
    which = (
        f"the {_family(scope.family)}' run {', '.join(code(r) for r in scope.runs)} only"
        + (
            f" (the other family's runs, {', '.join(code(r) for r in scope.left_out)}, are "
            "never pooled with it: see the table of runs)"
            if scope.left_out
            else ""
        )
        if scope is not None
        else "every run given (a summary written before drafter families were kept apart)"
    )
    return [
        "## Acceptance per language",
        "",
        "All draft tokens (vLLM's acceptance rate) and judged positions (every accepted "
        "draft and the first rejection of each step: the rows the class breakdowns use), "
        f"over {which}. Prompts count distinct prompts.",
        "",
        *md_table(
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
        f"`*` fewer than {md(or_missing(s.settings.min_count))} rows (sparse).",
        "",
    ]


def _family_table(s: Summary) -> list[str]:
    """Judged-position rates per drafter family (pooled over the family's runs, as the
    verdicts read them); vLLM's rate is per run only (the table of runs)."""
    rows = []
    for name, fam in s.families.items():
        rows.append(
            [
                _family(name),
                md(runs_phrase(fam.configurations)),
                *(rate_cell(fam.acceptance_judged.get(lang)) for lang in LANG_ORDER),
                interval(fam.gap_judged, "pp"),
            ]
        )
    if not rows:
        return []
    return [
        "## Judged positions per drafter family",
        "",
        "vLLM's rate over all draft tokens falls with k and is given per run only (the "
        "table of runs above). The judged-position rate (accepted / (accepted + the first "
        "rejection of each step)) is what the verdicts read; each family pools its own "
        "runs, never the other family's.",
        "",
        *md_table(["family", "runs", "Japanese", "English", "JA − EN"], rows),
    ]


def _positions(s: Summary) -> list[str]:
    """Acceptance by draft position per run (over the steps that proposed a draft at p),
    never pooled: a position exists only in runs with k above it."""
    runs = [r for r in s.runs if r.by_position]
    if not runs:
        return []
    width = max(r.k or 0 for r in runs)
    rows = []
    for run in runs:
        for lang in lang_order(run.by_position):
            cond = run.by_position_conditional.get(lang) or {}
            cells = []
            for p in range(width):
                unc = run.by_position[lang].get(str(p))
                if unc is None:
                    cells.append(MISSING)
                    continue
                c = cond.get(str(p))
                cells.append(f"{num(unc.rate, 'rate')} ({num(c.rate if c else None, 'rate')})")
            rows.append([code(run.label, table=True), md(run.k), lang_name(lang), *cells])
    return [
        "## Acceptance by draft position, per run",
        "",
        "Accepted at position p / the steps that proposed a draft at p (vLLM's per-position "
        "acceptance); in brackets, conditional on reaching p (drafts 0..p−1 accepted). Per "
        "run only: pooling runs of different k would count the steps of a k = 1 run as "
        "rejections at position 4. Intervals: analysis/tables.md.",
        "",
        *md_table(["run", "k", "language", *(f"p{p}" for p in range(width))], rows),
    ]


def _split_row(label: str, split: Split, notes: list[str]) -> list[str]:
    """One row of the split table; a split the data cannot support gets a numbered note
    with the reason instead of three copies of it."""
    support = split.support or Support()
    if split.not_estimable:
        notes.append(f"{label}: {md(split.not_estimable)}")
        parts = [f"not estimable ({len(notes)})"] * len(PARTS)
    else:
        parts = [interval(split.part(part), "pp") for part, _ in PARTS]
    return [
        label,
        md(or_missing(split.gap.n if split.gap is not None else None)),
        interval(split.gap, "pp"),
        *parts,
        num(1.0 - support.share_ja, "share") if support.share_ja is not None else MISSING,
        num(1.0 - support.share_en, "share") if support.share_en is not None else MISSING,
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


def _gap(s: Summary) -> list[str]:
    lines = ["## The Japanese − English gap", ""]
    gap = s.gap
    if gap is None and not s.families:
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
    for name, family in s.families.items():
        if family.confidence is not None:
            label = f"target's confidence, {_family(name)}"
            rows.append(_split_row(label, family.confidence, notes))
    if gap is not None:
        family_name = _family(gap.family)
        fam = s.families.get(str(gap.family)) or Family(name=str(gap.family))
        pooled_k = (
            f", pooled over {md(runs_phrase(fam.configurations))}: per run in the table of runs"
            if len(fam.ks) > 1
            else ""
        )
        lines += [
            f"- All draft tokens ({family_name}): {interval(gap.overall, 'pp')} "
            f"({md(or_missing(gap.overall.n if gap.overall else None))} draft tokens"
            f"{pooled_k}).",
            f"- Judged positions ({family_name}): {interval(gap.judged, 'pp')} "
            f"({md(or_missing(gap.judged.n if gap.judged else None))} rows).",
            f"- Relative, judged positions (Japanese rate / English rate − 1): "
            f"{interval(gap.relative_judged, 'pct')}.",
        ]
        if s.h2_contrast is not None:
            lines.append(
                "- Within-confidence gap, trained minus training-free drafters (H2's "
                f"effect): {interval(s.h2_contrast.difference, 'pp')}."
            )
        lines.append("")
        for column, label in DECOMPOSITIONS:
            if column in gap.decomposition:
                rows.append(_split_row(f"{label}, {family_name}", gap.decomposition[column], notes))
    if rows:
        lines += md_table(SPLIT_HEADER, rows)
    if notes:
        lines += [f"Not estimable: ({i}) {note}." for i, note in enumerate(notes, 1)]
        lines.append("")
    return lines


def _classes(s: Summary) -> list[str]:
    """The declared class breakdowns as JA − EN differences, per family: the compared
    classes whose Holm-adjusted p is below 5%, and what could not be compared."""
    classes = s.classes
    if classes is None or not classes.families:
        return []
    lines = [
        "## Where Japanese and English differ within a class",
        "",
        "Japanese − English judged acceptance within each class that both languages fill, "
        "per drafter family; families of comparisons declared before the data (one drafter "
        "family × one breakdown: script, particle type, part of speech, morpheme boundary, "
        "draft position), Holm-adjusted within each. Classes only one language fills (kanji, "
        "hiragana, byte fragments; most parts of speech, whose Japanese and English labels "
        "differ) are not compared. Every class: analysis/tables.md.",
        "",
    ]
    rows = []
    for name, fam in classes.families.items():
        for column, table in fam.by.items():
            found = [
                c
                for c in table.classes
                if c.difference is not None
                and c.difference.p_holm is not None
                and c.difference.p_holm < 0.05
            ]
            one = [c for c in table.classes if c.status in ("only_ja", "only_en")]
            detail = (
                ", ".join(
                    f"{f'p{c.cls}' if column == 'position' else code(c.cls, table=True)} "
                    f"{interval(c.difference, 'pp')} (Holm p "
                    f"{num(c.difference.p_holm if c.difference else None, 'rate')})"
                    for c in found
                )
                or "no class"
            )
            rows.append(
                [
                    _family(name),
                    md(COLUMN_WORDS.get(column, column)),
                    md(or_missing(table.comparisons)),
                    detail,
                    md(len(one)),
                ]
            )
    lines += md_table(
        [
            "family",
            "breakdown",
            "classes compared",
            "differences with Holm p below 0.05 (JA − EN, 95% interval)",
            "classes of one language",
        ],
        rows,
    )
    return lines


def _rejections(s: Summary) -> list[str]:
    if not s.rejections:
        return []
    rows = []
    for name, fam in s.rejections.items():
        for lang in lang_order(fam.rejections):
            rows.append(
                [
                    _family(name),
                    lang_name(lang),
                    md(fam.rejections.get(lang)),
                    *(
                        interval(fam.shares.get(kind, {}).get(lang), "share", "share")
                        for kind in ("split", "text", "draft_partial", "emitted_partial")
                    ),
                    md(fam.unknown.get(lang, 0)),
                ]
            )
    gaps = [
        f"- Split share, JA − EN, {_family(name)}: {interval(fam.split_gap, 'pp')}."
        for name, fam in s.rejections.items()
    ]
    return [
        "## Rejections by kind",
        "",
        "For every rejected draft whose identity is known, D its bytes and T the bytes the "
        "target wrote from that position on: a *split* disagreement when T starts with D "
        "(the drafter proposed the very text the target wrote, cut into tokens "
        "differently: tokenization's cost in its purest form), else a *text* "
        "disagreement; *unknown* when the output ends inside D. Flags: the draft, or the "
        "target's replacement, ends inside a UTF-8 character. Shares of the rejections "
        "with a known kind, with 95% prompt-pair intervals.",
        "",
        *md_table(
            [
                "family",
                "language",
                "rejections",
                "split",
                "text",
                "draft ends inside a character",
                "replacement ends inside a character",
                "unknown",
            ],
            rows,
        ),
        *gaps,
        "",
    ]


def _domains(s: Summary) -> list[str]:
    if not s.domains:
        return []
    lines = [
        "## Per domain",
        "",
        f"Judged gap, Japanese − English, per domain ({md(s.domain_source)}), with 95% "
        "intervals over the domain's prompt pairs; the reading against −δ uses the "
        "decision interval Bonferroni-adjusted for the number of domains. Heterogeneity: a "
        "permutation test of the domain labels over prompt pairs (a random-effects spread "
        "would rest on 5–11 clusters per domain; docs/analysis.md).",
        "",
    ]
    for name, fam in s.domains.items():
        rows = [
            [
                md(domain),
                md(g.pairs),
                interval(g, "pp"),
                f"{num(g.adjusted_low, 'pp')} to {qty(g.adjusted_high, 'pp')}",
                md(g.reading),
            ]
            for domain, g in fam.domains.items()
        ]
        lines += [f"### {_family(name)}", ""]
        lines += md_table(
            ["domain", "pairs", "JA − EN", "adjusted decision interval", "reading"], rows
        )
        het = fam.heterogeneity
        if het is not None:
            lines.append(
                f"Heterogeneity: not estimable ({md(het.not_estimable)})."
                if het.not_estimable
                else f"Heterogeneity: between-domain spread {qty(het.spread, 'pp').lstrip('+')}"
                f" (by chance about {qty(het.chance_spread, 'pp').lstrip('+')}), permutation "
                f"p = {num(het.p, 'rate')} ({md(het.permutations)} permutations)."
            )
            lines.append("")
    return lines


def _explore(s: Summary) -> list[str]:
    explore = s.gap.explore if s.gap is not None else None
    if explore is None or not explore.classes:
        return []
    shown = explore.classes[:TOP_CLASSES]
    rows = [
        [
            _family(c.family),
            md(c.by),
            md(c.cls),
            md(c.rows_ja),
            md(c.rows_en),
            num(c.rate_ja, "rate"),
            num(c.rate_en, "rate"),
            interval(c.difference, "pp"),
            num(c.difference.p_adjusted if c.difference else None, "rate"),
        ]
        for c in shown
    ]
    more = len(explore.classes) - len(shown)
    return [
        "## Where it concentrates (exploratory)",
        "",
        "A search over every breakdown, transitions and BPE ranks included; the declared "
        "breakdowns above are the reading to quote. "
        f"Japanese − English acceptance within each class that both languages fill, "
        f"the {len(shown)} largest of {md(explore.comparisons)} comparisons"
        + (f" ({more} more in summary.json)" if more > 0 else "")
        + ". Exploratory: the intervals are Bonferroni-adjusted for all comparisons "
        f"(level {num(explore.level, 'rate')}) and the p-values Holm-adjusted; "
        "the verdicts do not read them.",
        "",
        *md_table(
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
    s: Summary,
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
    lines += _speed_model(s)
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
    lines += md_table(
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


def _speed_model(s: Summary) -> list[str]:
    rows = []
    for run in s.runs:
        source = md(or_missing(run.draft_cost_source))
        for lang in lang_order(run.speed):
            m = run.speed[lang]
            rows.append(
                [
                    code(run.label, table=True),
                    lang_name(lang),
                    md(or_missing(m.traced_k)),
                    num(m.measured_tokens_per_step, "per_step"),
                    f"{num(m.draft_cost, 'cost')} ({source})",
                    md(m.recommended_k) if m.recommended_k else "none (c assumed)",
                    qty(m.recommended_speedup, "speedup"),
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
        *md_table(
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


def _is_embedded(s: Summary) -> bool:
    """The analysed runs' target is the embedded demo model (by the signature)."""
    from tokenlens.models.embedded import TARGET

    model = parse_signature(s.signature or "").get("model", "")
    return model.split("@")[0] == TARGET.key


def _scope(s: Summary) -> list[str]:
    title = "## What this can and cannot say about Qwen3.5 with MTP or D-Flash on a GPU"
    if not _is_embedded(s):
        return [title, "", _SCOPE_OTHER, ""]
    sampling = parse_signature(s.signature or "").get("sampling", "")
    decoding = _GREEDY if sampling.startswith("greedy") else _SAMPLED
    paragraphs = [decoding if p == "{decoding}" else p for p in _SCOPE_EMBEDDED]
    return [title, "", paragraphs[0], "", *paragraphs[1:], ""]


def _signatures(
    s: Summary,
    bench_rows: Sequence[Mapping[str, Any]] | None,
    bench_info: Mapping[str, Any] | None,
) -> list[str]:
    lines = ["## Signatures", "", f"- analysis: {code(s.signature or MISSING)}"]
    for run in s.runs:
        if run.signature:
            lines.append(f"- run {code(run.label)}: {code(run.signature)}")
    if bench_rows is not None:
        lines.append(f"- bench: {code((bench_info or {}).get('signature') or MISSING)}")
    return [*lines, ""]
