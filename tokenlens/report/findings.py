"""``FINDINGS.md``: the study's answer in prose, built only from its own output files.

The HTML reports show everything; FINDINGS.md is the short text one reads first or
pastes into an issue. So that every sentence can be checked against a file, it is
generated from ``summary.json`` (``tokenlens analyze``) and, when given, the rows of
``results.csv`` and ``bench.json`` (``tokenlens bench``): nothing is recomputed here
except orderings and maxima, and the only fixed prose is the scope section (what the
embedded CPU pair can and cannot say about Qwen3.5 with MTP / D-Flash on a GPU),
which is a statement about the setup, not a measurement.

Same input, same text: no dates, stable orderings, and every number goes through
:func:`num` (formats in :data:`FORMATS`), which :mod:`tokenlens.report.index` uses too.
Text from the files (class names, run labels, evidence sentences, plan names) is
escaped for Markdown by :func:`md` / :func:`code`, so a label cannot break a table or
smuggle HTML into a renderer.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenlens.analysis.verdicts import tri
from tokenlens.signature import parse_signature

FINDINGS = "FINDINGS.md"

# A value that is missing or does not apply.
MISSING = "–"

# Every number format of FINDINGS.md and the index page, in one place:
# (format spec, scale, suffix of the number, unit after the number).
FORMATS: dict[str, tuple[str, float, str, str]] = {
    "rate": (".3f", 1.0, "", ""),  # acceptance rates
    "pp": ("+.1f", 100.0, "", " pp"),  # differences of rates, in percentage points
    "pct": ("+.0f", 100.0, "%", ""),  # relative differences
    "share": (".0f", 100.0, "%", ""),  # a language's share of rows
    "speedup": (".2f", 1.0, "", "×"),  # × the baseline
    "throughput": (".1f", 1.0, "", ""),  # tok/s, chars/s
    "per_step": (".2f", 1.0, "", ""),  # tokens or characters per verification step
    "cost": (".2f", 1.0, "", ""),  # draft cost c
}

LANG_ORDER = ("ja", "en")
LANG_NAMES = {"ja": "Japanese", "en": "English"}
HYPOTHESES = {"H1": "tokenization / text structure", "H2": "training data"}
VERDICT_WORDS = {
    "supported": "supported",
    "not_supported": "not supported",
    "inconclusive": "inconclusive",
}
RULE_WORDS = {
    "yes": "yes: the whole interval lies below −δ",
    "no": "no: the whole interval lies above −δ",
    "unsure": "unsure: the interval reaches across −δ or is missing",
}
# (decomposition column, what it splits by, the breakdown with its per-language counts)
DECOMPOSITIONS: tuple[tuple[str, str, str], ...] = (
    ("conf_bucket", "the target's confidence (top-1 probability)", "by_confidence"),
    ("script", "script", "by_script"),
    ("boundary", "morpheme boundary", "by_boundary"),
    ("particle_type", "particle type", "by_particle"),
    ("rank_bucket", "BPE rank", "by_bpe_rank"),
)
TOP_CLASSES = 5


# --- formatting (the one place numbers become text) -------------------------------------


def _finite(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def num(value: Any, kind: str) -> str:
    """``value`` as the number of a ``kind`` (:data:`FORMATS`), without its unit."""
    number = _finite(value)
    if number is None:
        return MISSING
    spec, scale, suffix, _ = FORMATS[kind]
    return format(number * scale, spec) + suffix


def qty(value: Any, kind: str) -> str:
    """``value`` with its unit: ``+1.2 pp``, ``1.45×``."""
    text = num(value, kind)
    return text if text == MISSING else text + FORMATS[kind][3]


def interval(stat: Mapping[str, Any] | None, kind: str, key: str = "value") -> str:
    """``+1.2 pp [-0.4, +2.9]``: the statistic and its interval (bracket left out when
    the analysis gave none, e.g. a rate resting on one request)."""
    if not stat:
        return MISSING
    text = qty(stat.get(key), kind)
    lo, hi = _finite(stat.get("ci_low")), _finite(stat.get("ci_high"))
    if text == MISSING or lo is None or hi is None:
        return text
    return f"{text} [{num(lo, kind)}, {num(hi, kind)}]"


def rate_cell(stat: Mapping[str, Any] | None) -> str:
    """A rate with its interval, ``*`` when the group is sparse (below min_count)."""
    text = interval(stat, "rate", "rate")
    return text + "*" if stat and stat.get("sparse") and text != MISSING else text


# --- Markdown escaping --------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#&!~])")


def md(value: Any) -> str:
    """Text from a file as Markdown prose: one line (any line break, U+2028 included,
    becomes a space) with every character Markdown or HTML could act on escaped."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(str(value).split()))


def code(value: Any, table: bool = False) -> str:
    """``value`` as a code span (identifiers, signatures); ``table`` escapes ``|``,
    which would end a GFM table cell even inside a code span."""
    text = " ".join(str(value).split())
    ticks = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (ticks + 1)
    if text.startswith("`") or text.endswith("`"):
        text = f" {text} "
    if table:
        text = text.replace("|", "\\|")
    return f"{fence}{text}{fence}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


def languages(block: Mapping[str, Any] | None) -> list[str]:
    """Japanese and English first, then any other language alphabetically."""
    block = block or {}
    return [x for x in LANG_ORDER if x in block] + sorted(x for x in block if x not in LANG_ORDER)


def lang_name(lang: str) -> str:
    return LANG_NAMES.get(lang, md(lang))


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


def _group_key(row: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(
        str(row.get(c) or "") for c in ("model", "dtype", "quantization", "corpus", "length")
    )


def _group_title(row: Mapping[str, Any]) -> str:
    kind = ", ".join(str(row[c]) for c in ("dtype", "quantization") if row.get(c))
    model = f"{row.get('model')} ({kind})" if kind else str(row.get("model"))
    return f"{md(model)} · corpus {md(row.get('corpus'))} · length {md(row.get('length'))}"


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
        f"files. Brackets are {_level(summary)} intervals from a request-clustered "
        f"bootstrap ({md(settings.get('bootstrap', MISSING))} replicates, seed "
        f"{md(settings.get('seed', MISSING))}). pp = percentage points of acceptance, "
        "Japanese minus English: negative means Japanese is worse.",
        "",
        "## In short",
        "",
    ]
    acc = summary.get("acceptance") or {}
    for lang in languages(acc):
        stat = acc[lang]
        lines.append(
            f"- Acceptance of draft tokens, {lang_name(lang)}: {rate_cell(stat)} "
            f"({md(stat.get('n', MISSING))} draft tokens)."
        )
    gap = summary.get("gap") or {}
    if gap.get("judged"):
        line = f"- Japanese − English, judged positions: {interval(gap['judged'], 'pp')}"
        conf = (gap.get("decomposition") or {}).get("conf_bucket")
        if conf:
            line += (
                "; split by the target's confidence: composition "
                f"{interval(conf.get('composition'), 'pp')}, "
                f"within {interval(conf.get('within'), 'pp')}"
            )
        lines.append(line + ".")
    hyps = summary.get("hypotheses") or {}
    for key, name in HYPOTHESES.items():
        verdict = str((hyps.get(key) or {}).get("verdict", "inconclusive"))
        lines.append(f"- {key} ({name}): **{md(VERDICT_WORDS.get(verdict, verdict))}**.")
    if bench_rows is not None:
        for lang, row in best_speedups(bench_rows).items():
            lines.append(
                f"- Best measured speedup, {lang_name(lang)}: "
                f"{qty(row.get('speedup_tok_s'), 'speedup')} in tok/s, "
                f"{qty(row.get('speedup_chars_s'), 'speedup')} in chars/s "
                f"({method_label(row)}, corpus {md(row.get('corpus'))})."
            )
    return [*lines, ""]


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
        rows.append(
            [
                code(run.get("label"), table=True),
                md(run.get("method")),
                md(run.get("k")),
                md(run.get("status")),
                *(md((acc.get(lang) or {}).get("requests", MISSING)) for lang in LANG_ORDER),
                *(rate_cell(acc.get(lang)) for lang in LANG_ORDER),
                interval(run.get("gap"), "pp"),
                "yes" if rec.get("matches") else "**no**",
            ]
        )
    if rows:
        lines += _table(
            [
                "run",
                "method",
                "k",
                "status",
                "JA requests",
                "EN requests",
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
    delta_rel = _finite(settings.get("delta_relative"))
    lines = [
        "## H1 and H2",
        "",
        "The verdicts follow the rules of docs/analysis.md (“Verdict rules”) with this "
        f"analysis' settings: threshold δ = {num(delta, 'pp').lstrip('+')} pp "
        f"({num(delta_rel, 'share')} for relative effects), at least "
        f"{md(settings.get('min_requests', MISSING))} distinct prompts per language, "
        f"classes with fewer than {md(settings.get('min_count', MISSING))} judged rows "
        "left out of the within-class part. Each rule asks whether Japanese is worse by "
        "more than δ.",
        "",
    ]
    hyps = summary.get("hypotheses") or {}
    by_conf = "conf_bucket" in ((summary.get("gap") or {}).get("decomposition") or {})
    for key, name in HYPOTHESES.items():
        h = hyps.get(key) or {}
        verdict = str(h.get("verdict", "inconclusive"))
        lines += [f"### {key} ({name}): **{md(VERDICT_WORDS.get(verdict, verdict))}**", ""]
        effect = {"value": h.get("effect"), "ci_low": h.get("ci_low"), "ci_high": h.get("ci_high")}
        if key == "H1":
            what = f"the composition part of the judged gap, by {md(h.get('basis', MISSING))}"
            kind, threshold = "pp", delta
        elif by_conf:
            what = "the within part of the trained drafters' judged gap at equal target confidence"
            kind, threshold = "pp", delta
        else:
            what = "the trained drafters' relative gap minus the n-gram runs'"
            kind, threshold = "pct", delta_rel
        if effect["value"] is None:
            lines.append("- Effect: not computed (see the evidence).")
        else:
            lines.append(f"- Effect ({what}): {interval(effect, kind)}{_rule(effect, threshold)}.")
        ngram = h.get("ngram_gap")
        if ngram:
            lines.append(
                "- Check, the training-free (n-gram) runs' gap: "
                f"{interval(ngram, 'pp')}{_rule(ngram, delta)}."
            )
        contrast = h.get("method_contrast")
        if contrast:
            lines.append(
                "- Check, relative Japanese gap: trained drafters "
                f"{interval(contrast.get('relative_gap_trained'), 'pct')}, n-gram "
                f"{interval(contrast.get('relative_gap_training_free'), 'pct')}; difference "
                f"{interval(contrast.get('difference'), 'pct')}"
                f"{_rule(contrast.get('difference'), delta_rel)}."
            )
        lines += [f"- Evidence (summary.json): {md(h.get('evidence', MISSING))}", ""]
    return lines


def _rule(effect: Mapping[str, Any] | None, delta: float | None) -> str:
    """How the verdict rule reads this interval against −δ."""
    if not effect or delta is None:
        return ""
    bounds = {"ci_low": effect.get("ci_low"), "ci_high": effect.get("ci_high")}
    return f" → {RULE_WORDS[tri(bounds, delta)]}"


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
        "draft and the first rejection of each step: the rows the class breakdowns use). "
        "Requests count (run, prompt) pairs.",
        "",
        *_table(
            [
                "language",
                "acceptance",
                "draft tokens",
                "requests",
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


def _gap(summary: Mapping[str, Any]) -> list[str]:
    lines = ["## The Japanese − English gap", ""]
    gap = summary.get("gap")
    if not gap:
        return [*lines, "Not computed: the analysis needs both Japanese and English runs.", ""]
    lines += [
        f"- All draft tokens: {interval(gap.get('overall'), 'pp')} "
        f"({md((gap.get('overall') or {}).get('n', MISSING))} draft tokens).",
        f"- Judged positions: {interval(gap.get('judged'), 'pp')} "
        f"({md((gap.get('judged') or {}).get('n', MISSING))} rows).",
        f"- Relative, judged positions (Japanese rate / English rate − 1): "
        f"{interval(gap.get('relative_judged'), 'pct')}.",
        "",
    ]
    decs = gap.get("decomposition") or {}
    present = [(c, label, b) for c, label, b in DECOMPOSITIONS if c in decs]
    present += [(c, md(c), "") for c in sorted(decs) if c not in {d[0] for d in DECOMPOSITIONS}]
    if not present:
        return lines
    lines += [
        "### Composition and within-class parts",
        "",
        "gap = composition + within (docs/analysis.md): *composition* is Japanese having "
        "more of the classes that are hard for the drafter, *within* is the same class "
        "being harder in Japanese. Classes that only one language has at least min_count "
        "rows of count entirely as composition; the last two columns give their share.",
        "",
    ]
    rows = []
    for column, label, _ in present:
        dec = decs[column]
        rows.append(
            [
                label,
                md((dec.get("gap") or {}).get("n", MISSING)),
                interval(dec.get("gap"), "pp"),
                interval(dec.get("composition"), "pp"),
                interval(dec.get("within"), "pp"),
                num(dec.get("unshared_share_ja"), "share"),
                num(dec.get("unshared_share_en"), "share"),
            ]
        )
    lines += _table(
        [
            "split by",
            "rows",
            "gap",
            "composition",
            "within",
            "JA rows in one-language classes",
            "EN rows in one-language classes",
        ],
        rows,
    )
    min_count = md((summary.get("settings") or {}).get("min_count", MISSING))
    for column, label, breakdown in present:
        lines += _classes(summary, decs[column], label, breakdown, min_count)
    return lines


def _contribution(cls: Mapping[str, Any]) -> float:
    parts = (_finite((cls.get(p) or {}).get("value")) for p in ("composition", "within"))
    return sum(p for p in parts if p is not None)


def _classes(
    summary: Mapping[str, Any],
    dec: Mapping[str, Any],
    label: str,
    breakdown: str,
    min_count: str,
) -> list[str]:
    """The classes with the largest contribution (composition + within) to the gap."""
    classes = list(dec.get("classes") or [])
    ranked = sorted(classes, key=lambda c: (-abs(_contribution(c)), str(c.get("class"))))[
        :TOP_CLASSES
    ]
    counts = summary.get(breakdown) or {}
    rows = []
    for cls in ranked:
        name = str(cls.get("class"))
        cells = []
        for lang in LANG_ORDER:
            stat = (counts.get(lang) or {}).get(name)
            share = num(cls.get(f"share_{lang}"), "share")
            if stat is not None:
                cells.append(f"{md(stat.get('n'))}{'*' if stat.get('sparse') else ''} ({share})")
            else:  # no row of this class in this language (or no breakdown to count them)
                cells.append("0" if _finite(cls.get(f"share_{lang}")) == 0 else f"({share})")
        rates = [
            num(cls.get(f"rate_{lang}"), "rate")
            + ("*" if ((counts.get(lang) or {}).get(name) or {}).get("sparse") else "")
            if cls.get(f"rate_{lang}") is not None
            else MISSING
            for lang in LANG_ORDER
        ]
        rows.append(
            [
                md(name),
                "yes" if cls.get("shared") else "no",
                *cells,
                *rates,
                interval(cls.get("composition"), "pp"),
                interval(cls.get("within"), "pp"),
                qty(_contribution(cls), "pp"),
            ]
        )
    if not rows:
        return []
    more = len(classes) - len(ranked)
    tail = f" ({more} smaller ones in tables.md and the report)" if more > 0 else ""
    return [
        f"### Where it concentrates: by {label}",
        "",
        f"The {len(ranked)} classes with the largest contribution{tail}. Rows: judged "
        "rows (share of the language's rows). `*` fewer than "
        f"{min_count} rows (sparse); a class sparse in either language is not in both, "
        "so its within part is 0 and its whole contribution is composition.",
        "",
        *_table(
            [
                "class",
                "in both",
                "JA rows",
                "EN rows",
                "JA rate",
                "EN rate",
                "composition",
                "within",
                "contribution",
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
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(_group_key(row), []).append(row)
    lines += [
        "Output tokens and characters per second (median over the repeats) and their "
        "speedup over the baseline (no speculation) of the same model and language; acc "
        "is vLLM's acceptance rate.",
        "",
    ]
    for group in groups.values():
        lines += _bench_group(group)
    others = sorted({str(r.get("lang")) for r in rows} - set(LANG_ORDER))
    if others:
        lines += [f"Other languages in results.csv: {md(', '.join(others))} (see results.md).", ""]
    return lines


def _bench_group(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    variants: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    duplicates = []
    for row in sorted(rows, key=lambda r: r.get("method") != "none"):  # baseline first
        cell = variants.setdefault((str(row.get("method_label")), str(row.get("k"))), {})
        lang = str(row.get("lang"))
        if lang in cell:
            duplicates.append(str(row.get("case_id")))
        else:
            cell[lang] = row
    table = []
    wins = {"ja": 0, "en": 0}
    for (label, k), by_lang in variants.items():
        ja, en = by_lang.get("ja") or {}, by_lang.get("en") or {}
        table.append(
            [
                md(label),
                md(k),
                num(ja.get("tok_s"), "throughput"),
                num(en.get("tok_s"), "throughput"),
                qty(ja.get("speedup_tok_s"), "speedup"),
                qty(en.get("speedup_tok_s"), "speedup"),
                num(ja.get("chars_s"), "throughput"),
                num(en.get("chars_s"), "throughput"),
                qty(ja.get("speedup_chars_s"), "speedup"),
                qty(en.get("speedup_chars_s"), "speedup"),
                num(ja.get("acceptance_rate"), "rate"),
                num(en.get("acceptance_rate"), "rate"),
            ]
        )
        s_ja, s_en = _finite(ja.get("speedup_tok_s")), _finite(en.get("speedup_tok_s"))
        if ja.get("method") != "none" and s_ja is not None and s_en is not None and s_ja != s_en:
            wins["en" if s_en > s_ja else "ja"] += 1
    lines = [f"#### {_group_title(rows[0])}", ""]
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
    if duplicates:
        lines += [
            f"Not shown (same method, k and language twice): {md(', '.join(duplicates))}.",
            "",
        ]
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
                    md(m.get("recommended_k", MISSING)),
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
        "(docs/analysis.md, “Speed model”), so it is only as good as c.",
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
    "- **Sample size.** A few prompts per language give wide intervals; an *inconclusive* "
    "verdict is then the honest answer, not a failure. docs/analysis.md says how much data "
    "the rules need.",
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
intervals and honest *inconclusive* verdicts) and the decoding (greedy acceptance is \
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
