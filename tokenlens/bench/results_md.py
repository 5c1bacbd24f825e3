"""``results.md``: the bench results as Markdown tables, Japanese beside English.

What one pastes into a blog post or an issue: per group of cases that share a model,
its dtype/quantization, a corpus and a length, one table in output tokens per second
and the same in characters per second, then acceptance by draft position. The layout
follows the study this project reproduces (per method: JA tok/s, EN tok/s, JA acc,
EN acc, EN/JA) so the numbers can be set side by side. The chars/s table is there
because a token carries ~1.5 characters of Japanese but ~4 of English: the same
tok/s is not the same amount of text.

The output depends only on the rows (in plan order) and ``bench.json``, so it is
golden-tested. Numbers, names and tables are written by :mod:`tokenlens.format`, as in
every other table of tokenlens; the HTML report uses the same cells.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tokenlens.bench_results import Row, setup_label
from tokenlens.format import MISSING, code, lang_order, md, md_table, num, qty, spread

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
    "- **runner**: the model runner (V1, V2) and async scheduling vLLM resolved for the "
    "case's engine.",
    "- **speedup**: tok/s (chars/s) over the baseline (no speculation) of the same model, "
    "corpus, length, language and concurrency that ran on the same runner and async "
    "setting (like for like); – when there is none (the note under the table says why).",
    "- **over**: the baseline each speed-up divides by.",
    "- **EN/JA**: English / Japanese of the same row.",
    "- **pos j**: unconditional acceptance at draft position j, accepted at j / drafts.",
    "- **step ms**: median time of one decoding step (the model runner's execute_model + "
    "sample_tokens), from tokenlens's step timer in the worker; **drafting ms** the "
    "drafter's part of it, **verification ms** the rest (target forward pass, sampling, "
    "bookkeeping); **tokens/step** = 1 + accepted / drafts per request; **drafter cost** "
    "= drafting / the like-for-like baseline's step, in target steps; **c** = that per "
    "drafted token; **timer µs** the timer's own time per step.",
    "- **traced / plain**: tok/s with tokenlens tracing over tok/s of the same case on an "
    "engine without the plugin (bench --compare-plain); **one invocation**: whether both "
    "were measured by the same bench invocation (no: a resumed bench, not like for like).",
    f"- {MISSING}: missing or does not apply.",
)
# *one invocation* of the traced/plain table; a results.csv written before sessions were
# recorded has neither answer (MISSING).
_ONE_INVOCATION: dict[bool | None, str] = {True: "yes", False: "**no**"}


def lang_of(row: Mapping[str, Any]) -> str:
    return str(row.get("lang") or MISSING)


def is_baseline(row: Mapping[str, Any]) -> bool:
    """A case without speculation (vLLM method ``none``)."""
    return row.get("method") == "none"


def group_key(row: Mapping[str, Any]) -> GroupKey:
    """What a group of comparable cases shares: model, dtype, quantization, corpus,
    length (the matrix varies method, k and language within it)."""
    fields = ("model", "dtype", "quantization", "corpus", "length", "concurrency")
    return tuple("" if row.get(f) is None else str(row[f]) for f in fields)


def group_label(row: Mapping[str, Any]) -> str:
    """``qwen3 (bfloat16, awq) · corpus wiki · length short``, empty parts left out."""
    model, dtype, quantization, corpus, length, concurrency = group_key(row)
    setup = ", ".join(x for x in (dtype, quantization) if x)
    parts = [f"{model or MISSING}" + (f" ({setup})" if setup else "")]
    parts += [
        f"{name} {value}" for name, value in (("corpus", corpus), ("length", length)) if value
    ]
    if concurrency not in ("", "1"):
        parts.append(f"concurrency {concurrency}")
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


class BenchGroup:
    """One group's cases (:func:`groups`), indexed by (method, k) and language."""

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

    def setup(self, variant: Row) -> str:
        """The variant's runner and async setting (all its languages', if they differ)."""
        labels = [setup_label(r) for r in self.rows_of(variant)]
        return md(" / ".join(dict.fromkeys(labels)) or MISSING)

    def rows_of(self, variant: Row) -> list[Row]:
        found = [self.cells.get((variant_key(variant), lang)) for lang in self.langs]
        return [r for r in found if r is not None]

    def over(self, variant: Row) -> str:
        """The method labels of the baselines the variant's speed-ups divide by."""
        if is_baseline(variant):
            return MISSING
        names = {
            r["baseline_case_id"]: r for r in self.rows_of(variant) if r.get("baseline_case_id")
        }
        labels = []
        for case_id in names:
            base = next((r for r in self.cells.values() if r.get("case_id") == case_id), None)
            labels.append(method_name(base) if base is not None else str(case_id))
        return md(", ".join(dict.fromkeys(labels)) or MISSING)

    def metric_table(self, value: str, speedup_col: str, unit: str) -> list[str]:
        langs = self.langs
        header = ["method", "k", "runner"]
        header += [f"{md(lang.upper())} {unit}" for lang in langs]
        header += [f"{md(lang.upper())} acc" for lang in langs]
        header += [f"{md(lang.upper())} speedup" for lang in langs]
        if self.ratio():
            header.append("/".join(lang.upper() for lang in RATIO))
        header.append("over")
        body = []
        for variant in self.variants:
            cells = [md(method_name(variant)), str(variant_key(variant)[1]), self.setup(variant)]
            for lang in langs:
                row = self.cells.get((variant_key(variant), lang)) or {}
                cells.append(
                    spread(
                        row.get(value),
                        row.get(value + "_min"),
                        row.get(value + "_max"),
                        "throughput",
                    )
                )
            cells += [num(self.get(variant, lang, "acceptance_rate"), "rate") for lang in langs]
            cells += [qty(self.get(variant, lang, speedup_col), "speedup") for lang in langs]
            if self.ratio():
                top, bottom = (self.get(variant, lang, value) for lang in RATIO)
                cells.append(num(top / bottom if top is not None and bottom else None, "ratio"))
            cells.append(self.over(variant))
            body.append(cells)
        return md_table(header, body, right=[1, *range(3, len(header) - 1)])

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
                cells = [md(method_name(variant)), str(variant_key(variant)[1]), md(lang)]
                body.append(cells + [num(value, "rate") for value in per_position])
        if not body:
            return []
        body = [cells + [MISSING] * (3 + width - len(cells)) for cells in body]
        header = ["method", "k", "lang"] + [f"pos {j}" for j in range(1, width + 1)]
        title = "### Acceptance by draft position (unconditional: accepted at j / drafts)"
        return [title, "", *md_table(header, body, right=[1, *range(3, len(header))])]

    def ordered_rows(self) -> list[Row]:
        """The group's cases, variant by variant, languages in order."""
        return [r for variant in self.variants for r in self.rows_of(variant)]

    def step_table(self) -> list[str]:
        """The step split per case: where a step's time goes, and the drafter's cost."""
        rows = [
            r
            for r in self.ordered_rows()
            if r.get("step_timing") is not None or r.get("step_ms") is not None
        ]
        if not rows:
            return []
        header = ["method", "k", "lang", "runner", "step ms", "drafting ms"]
        header += ["verification ms", "tokens/step", "drafter cost", "c", "timer µs"]
        body = [
            [
                md(method_name(r)),
                str(variant_key(r)[1]),
                md(lang_of(r)),
                md(setup_label(r)),
                num(r.get("step_ms"), "ms"),
                num(r.get("draft_ms"), "ms"),
                num(r.get("verify_ms"), "ms"),
                num(1.0 if is_baseline(r) else r.get("mean_acceptance_length"), "per_step"),
                num(r.get("draft_target_steps"), "ratio"),
                num(r.get("draft_cost"), "cost"),
                num(r.get("timer_us"), "us"),
            ]
            for r in rows
        ]
        sources = sorted({str(r["step_timing"]) for r in rows if r.get("step_ms") is not None})
        how = (
            f"Timed with {md(', '.join(sources))} in the model runner's process." if sources else ""
        )
        missing = [
            f"{md(r.get('case_id'))}: {md(r.get('step_timing'))}"
            for r in rows
            if r.get("draft_ms") is None and not is_baseline(r)
        ]
        lines = ["### Step time split (median over the decode steps of the measured repeats)", ""]
        lines += md_table(header, body, right=[1, *range(4, len(header))])
        if how:
            lines += [how, ""]
        if missing:
            lines += ["Split unavailable: " + "; ".join(missing) + ".", ""]
        return lines

    def plain_table(self) -> list[str]:
        """Traced vs plain tok/s of the cases ``--compare-plain`` ran again."""
        rows = [r for r in self.ordered_rows() if r.get("plain_tok_s") is not None]
        if not rows:
            return []
        header = [
            "method",
            "k",
            "lang",
            "traced tok/s",
            "plain tok/s",
            "traced / plain",
            "one invocation",
        ]
        body = [
            [
                md(method_name(r)),
                str(variant_key(r)[1]),
                md(lang_of(r)),
                spread(r.get("tok_s"), r.get("tok_s_min"), r.get("tok_s_max"), "throughput"),
                spread(
                    r.get("plain_tok_s"),
                    r.get("plain_tok_s_min"),
                    r.get("plain_tok_s_max"),
                    "throughput",
                ),
                num(r.get("traced_over_plain"), "ratio"),
                _ONE_INVOCATION.get(r.get("plain_same_session"), MISSING),
            ]
            for r in rows
        ]
        title = "### Traced vs plain (the same cases on an engine without tokenlens)"
        lines = [title, "", *md_table(header, body, right=[1, 3, 4, 5])]
        if any(r.get("plain_same_session") is False for r in rows):
            lines += [
                "**Not like for like** where *one invocation* reads no: the traced and the "
                "plain tok/s were measured by different bench invocations (the bench was "
                "resumed), possibly on another host or day, so the ratio mixes host and load "
                "with tracing's cost. Measure both in one invocation (a new --out, or "
                "--restart) to read tracing's cost.",
                "",
            ]
        return lines

    def notes(self) -> list[str]:
        """Warnings (slower than the like-for-like baseline), then the reasons for missing
        speed-ups, each reason once with the cases it applies to."""
        lines = []
        reasons: dict[str, list[str]] = {}
        for r in self.ordered_rows():
            if r.get("warning"):
                lines.append(f"- **Slower than its baseline**: {md(r['warning'])}.")
            if r.get("speedup_note") and not is_baseline(r):
                reasons.setdefault(str(r["speedup_note"]), []).append(str(r.get("case_id")))
        for reason, cases in reasons.items():
            who = ", ".join(cases) if len(cases) <= 3 else f"{len(cases)} cases"
            lines.append(f"- {md(who)}: {md(reason)}.")
        return [*lines, ""] if lines else []

    def markdown(self) -> list[str]:
        lines = [f"## {md(self.label)}", ""]
        for title, value, speedup_col, unit in _METRICS:
            lines += [f"### {title}", "", *self.metric_table(value, speedup_col, unit)]
            if value == "tok_s":
                lines += self.notes()
        lines += self.step_table()
        lines += self.plain_table()
        lines += self.position_table()
        for row, kept in self.duplicates:
            lines += [
                f"Not shown: case {md(row.get('case_id'))}, same method, k and language "
                f"as case {md(kept.get('case_id'))}.",
                "",
            ]
        return lines


def _header(bench: Mapping[str, Any], cases: int) -> list[str]:
    plan = bench.get("plan")
    plan = plan if isinstance(plan, Mapping) else {}
    title = "# tokenlens bench" + (f": {md(plan['name'])}" if plan.get("name") else "")
    lines = [title, ""]
    if plan.get("description"):
        lines += [md(plan["description"]), ""]
    if bench.get("signature"):
        lines += [code(bench["signature"]), ""]
    facts = [
        f"{name} {md(bench[key])}"
        for name, key in (("tokenlens", "tokenlens_version"), ("vLLM", "vllm_version"))
        if bench.get(key)
    ]
    done, total = bench.get("cases_done"), bench.get("cases_total")
    if total is not None:
        facts.append(f"{cases if done is None else done} of {total} cases")
    else:
        facts.append(f"{cases} cases")
    facts += [md(bench[key]) for key in ("created_at",) if bench.get(key)]
    if bench.get("server"):
        facts.append(f"server {md(bench['server'])}")
    lines += [" · ".join(facts), ""]
    if done is not None and total is not None and done < total:
        lines += [f"**Partial**: {done} of {total} cases done; the tables show those.", ""]
    return lines


def results_markdown(rows: list[Row], bench: Mapping[str, Any] | None = None) -> str:
    """The text of ``results.md`` for the rows of ``results.csv`` (in plan order) and
    ``bench.json`` (any key may be missing)."""
    lines = _header(bench or {}, len(rows))
    for group in groups(rows):
        lines += BenchGroup(group).markdown()
    if not rows:
        lines += ["No cases yet.", ""]
    lines += ["## Legend", "", *LEGEND, ""]
    return "\n".join(lines)
