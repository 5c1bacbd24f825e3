"""FINDINGS.md's runs: what was measured, where the numbers come from, and acceptance
per run, per position and per drafter family (the context of ``templates/findings.md``).

Every cell is Markdown already (:mod:`tokenlens.format`); vLLM's acceptance rate is
shown per run only, since it depends on the method and on k.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tokenlens.analysis.summary_figures import Rate
from tokenlens.analysis.summary_file import Summary
from tokenlens.analysis.summary_runs import RunSummary
from tokenlens.analysis.wording import runs_phrase
from tokenlens.format import (
    LANG_ORDER,
    MISSING,
    code,
    interval,
    lang_name,
    lang_order,
    md,
    num,
    or_missing,
    rate_cell,
)
from tokenlens.replay.compare import known_rows
from tokenlens.report.tables import FAMILY_WORDS
from tokenlens.signature import parse_signature

# (signature key, what it names), in the order "What was measured" lists them
SIGNATURE_LINES = (
    ("model", "Target model"),
    ("draft", "Drafters"),
    ("method", "Methods"),
    ("k", "Draft tokens per step (k)"),
    ("tokenizer", "Tokenizer"),
    ("sampling", "Sampling"),
    ("vllm", "vLLM"),
)


def family_words(name: str | None) -> str:
    """A drafter family as prose (``training-free (n-gram) drafters``), as Markdown."""
    return FAMILY_WORDS.get(str(name), md(name))


def measured(s: Summary, checks: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """ "What was measured": provenance, the analysis signature's parts, the runs."""
    sig = parse_signature(s.signature or "")
    runs = []
    for run in s.runs:
        checked = "derived (replayed)" if run.replayed else "yes" if run.reconciled else "**no**"
        acc = run.acceptance
        runs.append(
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
    return {
        **_provenance(s, checks),
        "signature": [(label, code(sig[key])) for key, label in SIGNATURE_LINES if key in sig],
        "runs": runs,
    }


def _provenance(s: Summary, checks: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """Where the numbers come from: the weights, the dtype, which runs are replays of
    which trace, and how the replays were checked against real traces."""
    weights: dict[str, str] = {}
    for run in s.runs:
        for m in run.models or ():
            weights.setdefault(str(m.get("role") or m.get("key")), str(m.get("weights")))
    replayed = [run for run in s.runs if run.replayed]
    by_source: dict[str, list[RunSummary]] = {}
    for run in replayed:
        by_source.setdefault(run.replay_source or run.replayed_from or "?", []).append(run)
    traced = [run for run in s.runs if not run.replayed]
    return {
        "weights": [(md(role), md(w)) for role, w in weights.items()],
        "dtypes": md(
            ", ".join(sorted({r.dtype.removeprefix("torch.") for r in s.runs if r.dtype}))
        ),
        "devices": md(", ".join(sorted({r.device for r in s.runs if r.device}))),
        "replays": [
            {
                "count": len(runs),
                "everything": not traced and len(by_source) == 1,
                "source": code(source),
                "runs": ", ".join(code(r.label) for r in runs),
            }
            for source, runs in by_source.items()
        ],
        "traced": ", ".join(code(r.label) for r in traced),
        **(_checks(replayed, checks) if replayed else {"checks": [], "unchecked": []}),
    }


def _checks(
    replayed: Sequence[RunSummary], checks: Sequence[Mapping[str, Any]] | None
) -> dict[str, Any]:
    """Per replayed method: its checks against a real trace, or that it was not checked."""
    done = {str(c.get("replayed")): c for c in checks or ()}
    lines = []
    for c in done.values():
        rows = c.get("rows_traced")
        counts = known_rows(c)
        lines.append(
            {
                "traced": code(c.get("traced")),
                "replayed": code(c.get("replayed")),
                "equal": _count(counts["equal_known"]),
                "known": _count(counts["known"]),
                "unknown": _count(counts["unknown"]) if counts["unknown"] else "",
                "unknown_differ": _count(counts["unknown_differ"])
                if counts["unknown_differ"]
                else "",
                "every_row": counts["equal_known"] == counts["known"]
                and not counts["unknown_differ"]
                and c.get("rows_replayed") == rows,
                "differing": md(len(c.get("differing_requests") or [])),
                "acceptance_traced": num(c.get("acceptance_traced"), "rate"),
                "acceptance_replayed": num(c.get("acceptance_replayed"), "rate"),
            }
        )
    checked = {str(c.get("replayed")).rsplit("-k", 1)[0] for c in done.values()}
    methods = sorted({str(r.method) for r in replayed})
    return {"checks": lines, "unchecked": [md(m) for m in methods if m not in checked]}


def _count(value: int | None) -> str:
    """``12,035``, or the missing mark."""
    return f"{value:,}" if value is not None else md(or_missing(value))


def _requests(rate: Rate | None) -> int | None:
    return rate.requests if rate is not None else None


def short_acceptance(s: Summary) -> dict[str, Any]:
    """ "In short": vLLM's acceptance per drafter family, the range over its runs (each
    run's rate is in the table of runs; a rate pooled over k or over families would
    describe no configuration), and the judged-position rate the verdicts read. An
    analysis without families (one language, or an old summary): the rate per language."""
    families = []
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
        families.append(
            {
                "family": family_words(name),
                "configurations": md(runs_phrase(family.configurations)),
                "rates": ", ".join(parts),
                "several": len(runs) > 1,
                "judged": ", ".join(
                    f"{lang_name(lang)} {rate_cell(family.acceptance_judged[lang])}"
                    for lang in lang_order(family.acceptance_judged)
                ),
            }
        )
    languages = [
        {
            "lang": lang_name(lang),
            "rate": rate_cell(s.acceptance[lang]),
            "n": md(or_missing(s.acceptance[lang].n)),
        }
        for lang in lang_order(s.acceptance)
    ]
    return {"families": families, "languages": [] if families else languages}


def acceptance(s: Summary) -> dict[str, Any]:
    """vLLM's rate and the judged rate per language, when the summary's per-language
    sections cover one run configuration (summary.json ``scope``); over several k they
    would pool what depends on k, and the judged rates per family replace them."""
    scope = s.scope
    if scope is not None and len(scope.configurations) > 1:
        return {"families": _family_rows(s), "languages": None}
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
                interval(text.get("accepted_bytes"), "per_step"),
            ]
        )
    return {
        "families": None,
        "languages": rows,
        "scope": None
        if scope is None
        else {
            "family": family_words(scope.family),
            "runs": ", ".join(code(r) for r in scope.runs),
            "left_out": ", ".join(code(r) for r in scope.left_out),
        },
        "min_count": md(or_missing(s.settings.min_count)),
    }


def _family_rows(s: Summary) -> list[list[str]]:
    """Judged-position rates per drafter family (pooled over the family's runs, as the
    verdicts read them)."""
    return [
        [
            family_words(name),
            md(runs_phrase(fam.configurations)),
            *(rate_cell(fam.acceptance_judged.get(lang)) for lang in LANG_ORDER),
            interval(fam.gap_judged, "pp"),
        ]
        for name, fam in s.families.items()
    ]


def positions(s: Summary) -> dict[str, Any]:
    """Acceptance by draft position per run (over the steps that proposed a draft at p),
    never pooled: a position exists only in runs with k above it."""
    runs = [r for r in s.runs if r.by_position]
    width = max((r.k or 0 for r in runs), default=0)
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
    return {"header": ["run", "k", "language", *(f"p{p}" for p in range(width))], "rows": rows}


def text_per_step(s: Summary) -> dict[str, Any]:
    """Accepted tokens, characters and UTF-8 bytes per verification step, per run and
    language (they depend on k: never pooled)."""
    rows = []
    for run in s.runs:
        for lang in lang_order(run.text_per_step):
            text = run.text_per_step[lang]
            rows.append(
                [
                    code(run.label, table=True),
                    md(run.k),
                    lang_name(lang),
                    *(
                        interval(text.get(key), "per_step")
                        for key in ("accepted_tokens", "accepted_chars", "accepted_bytes")
                    ),
                ]
            )
    return {"rows": rows}


def byte_length(s: Summary) -> list[dict[str, Any]]:
    """Judged-position acceptance by the emitted token's byte length, per family: a row
    per bucket, Japanese beside English."""
    out = []
    for name, fam in s.byte_length.items():
        langs = lang_order(fam.rates)
        groups = list(dict.fromkeys(g for lang in langs for g in fam.rates[lang]))
        out.append(
            {
                "family": family_words(name),
                "configurations": md(runs_phrase(fam.configurations)),
                "header": ["bytes", *(lang_name(lang) for lang in langs)],
                "rows": [
                    [md(g), *(rate_cell(fam.rates[lang].get(g), count=True) for lang in langs)]
                    for g in groups
                ],
            }
        )
    return out
