"""FINDINGS.md's speed: the bench's measured tok/s and chars/s per method and k, their
speedups, and the speed model of the traced runs (the context of
``templates/findings.md``).

Every cell is Markdown already (:mod:`tokenlens.format`). The best speedups also feed
index.html (:func:`best_speedups`), so the two pages name the same case.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tokenlens.analysis.summary_file import Summary
from tokenlens.bench.results_md import BenchGroup, is_baseline
from tokenlens.bench.results_md import groups as bench_groups
from tokenlens.format import LANG_ORDER, code, lang_name, lang_order, md, num, or_missing, qty
from tokenlens.format import finite as _finite

BENCH_HEADER = (
    "method",
    "k",
    "runner",
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
    "over",
    "JA drafting / step ms",
    "EN drafting / step ms",
)
# (column, format) of each language pair of cells in a bench row, in BENCH_HEADER order
_BENCH_CELLS = (
    ("tok_s", "throughput", num),
    ("speedup_tok_s", "speedup", qty),
    ("chars_s", "throughput", num),
    ("speedup_chars_s", "speedup", qty),
    ("acceptance_rate", "rate", num),
)


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


def short_speedups(rows: Sequence[Mapping[str, Any]] | None) -> list[dict[str, str]]:
    """ "In short": the best measured speedup per language (none without a bench), with
    its caveat (a speed-up across bench invocations, say) where it has one."""
    return [
        {
            "lang": lang_name(lang),
            "tok_s": qty(row.get("speedup_tok_s"), "speedup"),
            "chars_s": qty(row.get("speedup_chars_s"), "speedup"),
            "method": method_label(row),
            "corpus": md(row.get("corpus")),
            "caveat": f"; {md(row['speedup_note'])}" if row.get("speedup_note") else "",
        }
        for lang, row in best_speedups(rows or ()).items()
    ]


def bench(
    rows: Sequence[Mapping[str, Any]] | None, info: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The bench's plan, whether it is partial, and one table per group of cases
    (None: no bench was given)."""
    if rows is None:
        return None
    info = info or {}
    plan = info.get("plan") or {}
    done, total = info.get("cases_done"), info.get("cases_total")
    partial = isinstance(done, int) and isinstance(total, int) and done < total
    return {
        "plan": code(plan["name"]) if plan.get("name") else "",
        "description": md(plan["description"]) if plan.get("description") else "",
        "partial": f"{done} of {total}" if partial else "",
        "empty": not rows,
        "header": list(BENCH_HEADER),
        "groups": [_group(BenchGroup(g)) for g in bench_groups(dict(r) for r in rows)],
        "others": md(", ".join(sorted({str(r.get("lang")) for r in rows} - set(LANG_ORDER)))),
    }


def _group(group: BenchGroup) -> dict[str, Any]:
    """One bench group's table, how often each language gained more, and the cases left
    out for appearing twice."""
    table = []
    wins = {"ja": 0, "en": 0}
    for variant in group.variants:
        row = [md(variant.get("method_label") or variant.get("method")), md(variant.get("k"))]
        row.append(group.setup(variant))
        for column, kind, fmt in _BENCH_CELLS:
            row += [fmt(group.get(variant, lang, column), kind) for lang in ("ja", "en")]
        row.append(group.over(variant))
        row += [_split(group, variant, lang) for lang in ("ja", "en")]
        table.append(row)
        s_ja = _finite(group.get(variant, "ja", "speedup_tok_s"))
        s_en = _finite(group.get(variant, "en", "speedup_tok_s"))
        if not is_baseline(variant) and s_ja is not None and s_en is not None and s_ja != s_en:
            wins["en" if s_en > s_ja else "ja"] += 1
    notes = [line.removeprefix("- ") for line in group.notes() if line]
    return {
        "label": group.label,
        "rows": table,
        "notes": notes,
        "wins": wins,
        "compared": wins["ja"] + wins["en"],
        "duplicates": md(", ".join(str(row.get("case_id")) for row, _ in group.duplicates)),
    }


def _split(group: BenchGroup, variant: dict[str, Any], lang: str) -> str:
    """``46.00 / 52.00``: drafting and whole step, ms (the step alone for a baseline)."""
    step = group.get(variant, lang, "step_ms")
    if step is None:
        return num(None, "ms")
    draft = group.get(variant, lang, "draft_ms")
    if is_baseline(variant) or draft is None:
        return num(step, "ms")
    return f"{num(draft, 'ms')} / {num(step, 'ms')}"


def speed_model(s: Summary) -> list[list[str]]:
    """The speed model per traced run and language: tokens per step, the draft cost and
    where it came from, the best k and its modelled speedup."""
    rows = []
    for run in s.runs:
        source = md(or_missing(run.draft_cost_source))
        for lang in lang_order(run.speed_by_lang):
            m = run.speed_by_lang[lang]
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
    return rows
