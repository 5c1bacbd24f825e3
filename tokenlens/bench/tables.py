"""``results.md``: the bench results as Markdown tables, Japanese beside English.

What one pastes into a blog post or an issue: per group of cases that share a model,
its dtype/quantization, a corpus and a length, one table in output tokens per second
and the same in characters per second, then acceptance by draft position. The layout
follows the study this project reproduces (per method: JA tok/s, EN tok/s, JA acc,
EN acc, EN/JA) so the numbers can be set side by side. The chars/s table is there
because a token carries ~1.5 characters of Japanese but ~4 of English: the same
tok/s is not the same amount of text.

The output depends only on the rows (in plan order) and ``bench.json``, so it is
golden-tested. Number formats live in :data:`FORMATS`; the HTML report uses them too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from tokenlens.bench.results import Row

# A value that is missing or does not apply (acceptance of a baseline, speedup
# without a baseline, a language a method was not run in).
MISSING = "–"

# Every number format of the bench tables (format specs), in one place.
FORMATS: dict[str, str] = {
    "rate": ".1f",  # tok/s, chars/s, bytes/s
    "acc": ".2f",  # acceptance rate, per-position acceptance (as in the study table)
    "speedup": ".2f",  # × the baseline
    "ratio": ".2f",  # EN/JA
    "length": ".2f",  # mean acceptance length
    "cv": ".1%",  # coefficient of variation of tok/s over repeats
    "seconds": ".3f",  # TTFT, wall time
}

# Japanese and English first: the comparison the project studies.
LANG_ORDER = ("ja", "en")
# The ratio column, when both languages are present: English over Japanese.
RATIO = ("en", "ja")

GroupKey = tuple[str, ...]
VariantKey = tuple[str, int]

# (table title, value column, speedup column, unit in the column headers)
_METRICS = (
    ("Output tokens per second", "tok_s", "speedup_tok_s", "tok/s"),
    ("Output characters per second", "chars_s", "speedup_chars_s", "chars/s"),
)

LEGEND = (
    "- **tok/s**: output tokens / wall time of a measured repeat; the median over the "
    "repeats, with their min–max in parentheses when they differ.",
    "- **chars/s**: characters of the output text / the same wall time. A token carries "
    "~1.5 characters of Japanese but ~4 of English, so chars/s compares the languages by "
    "text delivered, tok/s by work done.",
    "- **acc**: vLLM's acceptance rate, accepted / draft tokens over the measured "
    "repeats; – for the baseline, which drafts nothing.",
    "- **speedup**: tok/s (chars/s) over the baseline (no speculation) of the same model, "
    "corpus, length and language; – when that baseline is missing.",
    "- **EN/JA**: English / Japanese of the same row.",
    "- **pos j**: unconditional acceptance at draft position j, accepted at j / drafts.",
    f"- {MISSING}: missing or does not apply.",
)


def fmt(value: Any, kind: str) -> str:
    """``value`` in the format of ``kind`` (a key of :data:`FORMATS`), or :data:`MISSING`."""
    if value is None:
        return MISSING
    number = float(value)
    return format(number, FORMATS[kind]) if math.isfinite(number) else MISSING


def spread(median: Any, low: Any, high: Any, kind: str) -> str:
    """``12.3 (11.9–12.5)``: a median with the min–max over repeats, the range left out
    when it would print as nothing (one repeat, or it rounds away)."""
    text = fmt(median, kind)
    lo, hi = fmt(low, kind), fmt(high, kind)
    if text == MISSING or MISSING in (lo, hi) or lo == hi:
        return text
    return f"{text} ({lo}–{hi})"


def speedup(value: Any) -> str:
    """``1.56×``."""
    text = fmt(value, "speedup")
    return text if text == MISSING else text + "×"


def lang_order(langs: Iterable[str]) -> list[str]:
    """Distinct languages, Japanese and English first, the others alphabetically."""
    distinct = set(langs)
    return [x for x in LANG_ORDER if x in distinct] + sorted(distinct - set(LANG_ORDER))


def lang_of(row: Mapping[str, Any]) -> str:
    return str(row.get("lang") or MISSING)


def is_baseline(row: Mapping[str, Any]) -> bool:
    """A case without speculation (vLLM method ``none``)."""
    return row.get("method") == "none"


def group_key(row: Mapping[str, Any]) -> GroupKey:
    """What a group of comparable cases shares: model, dtype, quantization, corpus,
    length (the matrix varies method, k and language within it)."""
    fields = ("model", "dtype", "quantization", "corpus", "length")
    return tuple("" if row.get(f) is None else str(row[f]) for f in fields)


def group_label(row: Mapping[str, Any]) -> str:
    """``qwen3 (bfloat16, awq) · corpus wiki · length short``, empty parts left out."""
    model, dtype, quantization, corpus, length = group_key(row)
    setup = ", ".join(x for x in (dtype, quantization) if x)
    parts = [f"{model or MISSING}" + (f" ({setup})" if setup else "")]
    parts += [
        f"{name} {value}" for name, value in (("corpus", corpus), ("length", length)) if value
    ]
    return " · ".join(parts)


def variant_key(row: Mapping[str, Any]) -> VariantKey:
    """One row of a table: the plan's method name and k."""
    return (method_name(row), int(row.get("k") or 0))


def method_name(row: Mapping[str, Any]) -> str:
    return str(row.get("method_label") or row.get("method") or MISSING)


def variant_label(row: Mapping[str, Any]) -> str:
    """``ngram k=3``; the baseline by its name alone (its k is 0)."""
    name, k = variant_key(row)
    return name if is_baseline(row) else f"{name} k={k}"


def groups(rows: Iterable[Row]) -> list[list[Row]]:
    """Rows by :func:`group_key`, groups and rows in first-seen (plan) order."""
    found: dict[GroupKey, list[Row]] = {}
    for row in rows:
        found.setdefault(group_key(row), []).append(row)
    return list(found.values())


def variants(rows: Iterable[Row]) -> list[Row]:
    """The first row of each (method, k), baselines first, otherwise in plan order."""
    first: dict[VariantKey, Row] = {}
    for row in rows:
        first.setdefault(variant_key(row), row)
    return sorted(first.values(), key=lambda row: not is_baseline(row))  # stable


def _md(value: Any) -> str:
    """Text safe in a Markdown table cell (a ``|`` would start a new cell)."""
    return " ".join(str(value).split()).replace("|", "\\|")


def _table(header: list[str], body: list[list[str]], text: tuple[int, ...] = (0,)) -> list[str]:
    """A Markdown table; numbers right-aligned, the ``text`` columns left-aligned."""
    align = ["---" if i in text else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return [*lines, ""]


class _Group:
    """One group's cases, indexed by (method, k) and language."""

    def __init__(self, rows: list[Row]) -> None:
        self.label = group_label(rows[0])
        self.langs = lang_order(lang_of(r) for r in rows)
        self.variants = variants(rows)
        self.cells: dict[tuple[VariantKey, str], Row] = {}
        self.duplicates: list[tuple[Row, Row]] = []
        for row in rows:
            key = (variant_key(row), lang_of(row))
            if key in self.cells:
                self.duplicates.append((row, self.cells[key]))
            else:
                self.cells[key] = row

    def get(self, variant: Row, lang: str, column: str) -> Any:
        row = self.cells.get((variant_key(variant), lang))
        return None if row is None else row.get(column)

    def ratio(self) -> bool:
        return all(lang in self.langs for lang in RATIO)

    def metric_table(self, value: str, speedup_col: str, unit: str) -> list[str]:
        langs = self.langs
        header = ["method", "k"]
        header += [f"{_md(lang.upper())} {unit}" for lang in langs]
        header += [f"{_md(lang.upper())} acc" for lang in langs]
        header += [f"{_md(lang.upper())} speedup" for lang in langs]
        if self.ratio():
            header.append("/".join(lang.upper() for lang in RATIO))
        body = []
        for variant in self.variants:
            cells = [_md(method_name(variant)), str(variant_key(variant)[1])]
            for lang in langs:
                row = self.cells.get((variant_key(variant), lang)) or {}
                cells.append(
                    spread(row.get(value), row.get(value + "_min"), row.get(value + "_max"), "rate")
                )
            cells += [fmt(self.get(variant, lang, "acceptance_rate"), "acc") for lang in langs]
            cells += [speedup(self.get(variant, lang, speedup_col)) for lang in langs]
            if self.ratio():
                top, bottom = (self.get(variant, lang, value) for lang in RATIO)
                cells.append(fmt(top / bottom if top is not None and bottom else None, "ratio"))
            body.append(cells)
        return _table(header, body)

    def position_table(self) -> list[str]:
        body: list[list[str]] = []
        width = 0
        for variant in self.variants:
            if is_baseline(variant):
                continue
            for lang in self.langs:
                row = self.cells.get((variant_key(variant), lang))
                if row is None:
                    continue
                per_position = list(row.get("acceptance_per_position") or [])
                width = max(width, len(per_position))
                cells = [_md(method_name(variant)), str(variant_key(variant)[1]), _md(lang)]
                body.append(cells + [fmt(value, "acc") for value in per_position])
        if not body:
            return []
        body = [cells + [MISSING] * (3 + width - len(cells)) for cells in body]
        header = ["method", "k", "lang"] + [f"pos {j}" for j in range(1, width + 1)]
        title = "### Acceptance by draft position (unconditional: accepted at j / drafts)"
        return [title, "", *_table(header, body, text=(0, 2))]

    def markdown(self) -> list[str]:
        lines = [f"## {_md(self.label)}", ""]
        for title, value, speedup_col, unit in _METRICS:
            lines += [f"### {title}", "", *self.metric_table(value, speedup_col, unit)]
        lines += self.position_table()
        for row, kept in self.duplicates:
            lines += [
                f"Not shown: case {_md(row.get('case_id'))}, same method, k and language "
                f"as case {_md(kept.get('case_id'))}.",
                "",
            ]
        return lines


def _header(bench: Mapping[str, Any], cases: int) -> list[str]:
    plan = bench.get("plan")
    plan = plan if isinstance(plan, Mapping) else {}
    title = "# tokenlens bench" + (f": {_md(plan['name'])}" if plan.get("name") else "")
    lines = [title, ""]
    if plan.get("description"):
        lines += [str(plan["description"]).strip(), ""]
    if bench.get("signature"):
        lines += [f"`{bench['signature']}`", ""]
    facts = [
        f"{name} {bench[key]}"
        for name, key in (("tokenlens", "tokenlens_version"), ("vLLM", "vllm_version"))
        if bench.get(key)
    ]
    done, total = bench.get("cases_done"), bench.get("cases_total")
    if total is not None:
        facts.append(f"{cases if done is None else done} of {total} cases")
    else:
        facts.append(f"{cases} cases")
    facts += [str(bench[key]) for key in ("created_at",) if bench.get(key)]
    if bench.get("server"):
        facts.append(f"server {bench['server']}")
    lines += [" · ".join(facts), ""]
    if done is not None and total is not None and done < total:
        lines += [f"**Partial**: {done} of {total} cases done; the tables show those.", ""]
    return lines


def results_markdown(rows: list[Row], bench: Mapping[str, Any] | None = None) -> str:
    """The text of ``results.md`` for the rows of ``results.csv`` (in plan order) and
    ``bench.json`` (any key may be missing)."""
    lines = _header(bench or {}, len(rows))
    for group in groups(rows):
        lines += _Group(group).markdown()
    if not rows:
        lines += ["No cases yet.", ""]
    lines += ["## Legend", "", *LEGEND, ""]
    return "\n".join(lines)
