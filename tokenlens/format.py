"""How every number, language list and Markdown table of tokenlens is written.

One module for the presentation rules of every stage: the precision of each kind of
number (an acceptance rate prints with three decimals in results.md, tables.md,
FINDINGS.md and the HTML pages alike), the placeholder for a missing value, the
language order (Japanese and English first, the comparison the project studies), the
words for hypotheses and verdicts, the one Markdown escaping rule and the one
Markdown table builder.

Why here, at the top of the package, and not in ``tokenlens.report``: the analysis
writes evidence sentences into summary.json and the bench writes results.md, and
neither may import ``tokenlens.report`` (reports sit above them in the stages, and the
report package pulls in altair and vl-convert). So this module imports nothing but the
standard library and every stage may import it, like :mod:`tokenlens.errors`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# A value that is missing or does not apply (acceptance of a baseline, an interval the
# data cannot estimate, a language a method was not run in).
MISSING = "–"


@dataclass(frozen=True)
class Format:
    """One kind of number: ``format(value * scale, spec) + suffix``, then ``unit`` when
    written as a quantity (:func:`qty`)."""

    spec: str
    scale: float = 1.0
    suffix: str = ""  # part of the number: "%"
    unit: str = ""  # after the number and its interval: " pp", "×"


# Every kind of number, one precision each.
FORMATS: dict[str, Format] = {
    # Acceptance rates of every kind (vLLM's, judged positions, per class, per draft
    # position, their interval bounds) and the target's probabilities.
    "rate": Format(".3f"),
    # Differences of rates (Japanese − English), in percentage points.
    "pp": Format("+.1f", 100.0, unit=" pp"),
    # Relative differences.
    "pct": Format("+.0f", 100.0, "%"),
    # A share of rows or tokens.
    "share": Format(".1f", 100.0, "%"),
    # Speed over the baseline.
    "speedup": Format(".2f", unit="×"),
    # Plain ratios: EN/JA of a throughput, characters or bytes per token.
    "ratio": Format(".2f"),
    # Output tokens, characters or bytes per second.
    "throughput": Format(".1f"),
    # Tokens or characters per verification step, mean acceptance length.
    "per_step": Format(".2f"),
    # Draft cost c, relative to a target step.
    "cost": Format(".2f"),
    # Coefficient of variation over repeats.
    "cv": Format(".1%"),
    # Times to first token, wall times.
    "seconds": Format(".3f"),
    # Step times and their parts (drafting, verification), in milliseconds.
    "ms": Format(".2f"),
    # The step timer's own cost per step, in microseconds.
    "us": Format(".1f"),
}

LANG_ORDER = ("ja", "en")
LANG_NAMES = {"ja": "Japanese", "en": "English"}
HYPOTHESES = {"H1": "tokenization / text structure", "H2": "training data"}
# The verdicts of summary.json as prose; a verdict not listed prints as it is.
VERDICT_WORDS = {
    "supported": "supported",
    "not_supported": "not supported",
    "no_japanese_deficit": "no Japanese deficit",
    "inconclusive": "inconclusive",
    "insufficient_data": "insufficient data",
}


# --- numbers ----------------------------------------------------------------------------


def finite(value: Any) -> float | None:
    """``value`` as a finite float, or None (None, NaN, infinities, booleans, text)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def num(value: Any, kind: str) -> str:
    """``value`` as a number of ``kind`` (a key of :data:`FORMATS`), without its unit;
    :data:`MISSING` when it is not a finite number."""
    number = finite(value)
    if number is None:
        return MISSING
    f = FORMATS[kind]
    return format(number * f.scale, f.spec) + f.suffix


def qty(value: Any, kind: str) -> str:
    """``value`` with its unit: ``+1.2 pp``, ``1.45×``."""
    text = num(value, kind)
    return text if text == MISSING else text + FORMATS[kind].unit


def _field(stat: Any, key: str) -> Any:
    """The attribute ``key`` of a typed figure (an ``Estimate`` or ``Rate`` of
    ``tokenlens.analysis.summary_figures``, read by summary.json's one reader); None for
    no figure or no such field. A dict is refused: a figure is typed before it prints."""
    if isinstance(stat, Mapping):
        raise TypeError("a figure prints from its typed form (summary_figures), not a dict")
    return getattr(stat, key, None)


def not_estimable(stat: Any, key: str = "value") -> str | None:
    """``not estimable (why)`` for a figure the analysis marked as such, else None.

    summary.json never prints an unestimable part as 0: it is null with a
    ``not_estimable`` reason, and every view says so in the same words. ``stat`` is a
    typed figure (:func:`_field`).
    """
    why = _field(stat, "not_estimable")
    if stat and _field(stat, key) is None and why:
        return f"not estimable ({' '.join(str(why).split())})"
    return None


def interval(stat: Any, kind: str, key: str = "value") -> str:
    """``+1.2 pp [-0.4, +2.9]``: ``stat[key]`` with its unit and its interval
    (``ci_low``, ``ci_high``), the bracket left out when either bound is missing;
    ``not estimable (why)`` for a figure the data cannot support."""
    if not stat:
        return MISSING
    missing = not_estimable(stat, key)
    if missing:
        return missing
    text = qty(_field(stat, key), kind)
    low, high = finite(_field(stat, "ci_low")), finite(_field(stat, "ci_high"))
    if text == MISSING or low is None or high is None:
        return text
    return f"{text} [{num(low, kind)}, {num(high, kind)}]"


def interval_prose(stat: Any, kind: str, key: str = "value", level: str = "95%") -> str:
    """``-6.2 pp (95% CI -7.9 to -4.6)``: the same as :func:`interval`, for a sentence;
    ``not estimable (why)`` or ``n/a`` when there is no value."""
    missing = not_estimable(stat, key)
    if missing:
        return missing
    text = qty(_field(stat, key), kind)
    if text == MISSING:
        return "n/a"
    low, high = finite(_field(stat, "ci_low")), finite(_field(stat, "ci_high"))
    if low is None or high is None:
        return f"{text} (no interval)"
    return f"{text} ({level} CI {num(low, kind)} to {num(high, kind)})"


def decision_prose(low: Any, high: Any, level: Any) -> str:
    """``90% decision interval: -9.5 to -2.9 pp``: the interval a verdict reading used
    (empty when the figure has none, e.g. a summary written before decision intervals)."""
    lo, hi = finite(low), finite(high)
    if lo is None or hi is None:
        return ""
    lev = finite(level)
    label = f"{100 * lev:g}% " if lev is not None else ""
    return f"{label}decision interval: {num(lo, 'pp')} to {qty(hi, 'pp')}"


def rate_cell(stat: Any, *, count: bool = False, key: str = "rate") -> str:
    """A rate with its interval, `` (n=N)`` when ``count``, and ``*`` when the group is
    sparse (fewer rows than min_count)."""
    text = interval(stat, "rate", key)
    if not stat or text == MISSING:
        return text
    if count:
        text += f" (n={or_missing(_field(stat, 'n'))})"
    return text + "*" if _field(stat, "sparse") else text


def or_missing(value: Any) -> Any:
    """``value``, or :data:`MISSING` when it is None (a count a file does not hold)."""
    return MISSING if value is None else value


def spread(median: Any, low: Any, high: Any, kind: str) -> str:
    """``12.3 (11.9–12.5)``: a median with the min–max over repeats, the range left out
    when it would print as nothing (one repeat, or it rounds away)."""
    text = num(median, kind)
    lo, hi = num(low, kind), num(high, kind)
    if text == MISSING or MISSING in (lo, hi) or lo == hi:
        return text
    return f"{text} ({lo}–{hi})"


# --- languages --------------------------------------------------------------------------


def lang_key(lang: str) -> tuple[int, str]:
    """Sort key: Japanese, English, then the others alphabetically."""
    rank = LANG_ORDER.index(lang) if lang in LANG_ORDER else len(LANG_ORDER)
    return rank, lang


def lang_order(langs: Iterable[str]) -> list[str]:
    """The distinct languages of ``langs`` (any iterable, a dict's keys too) in
    :func:`lang_key` order."""
    return sorted(set(langs), key=lang_key)


def lang_name(lang: str) -> str:
    """``Japanese`` for ``ja``; other codes as Markdown-safe text."""
    return LANG_NAMES.get(lang, md(lang))


def verdict_words(verdict: Any) -> str:
    """A verdict of summary.json as prose (``not_supported`` -> ``not supported``)."""
    return VERDICT_WORDS.get(str(verdict), str(verdict))


# --- Markdown ---------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|#&!~])")


def md(value: Any) -> str:
    """Text from a file (a name, a label, a sentence) as Markdown: one line (any line
    break, U+2028 included, becomes a space) with every character Markdown or HTML could
    act on escaped. The one escaping rule of every Markdown file tokenlens writes."""
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


def md_table(
    header: Sequence[str], rows: Iterable[Sequence[str]], right: Collection[int] = ()
) -> list[str]:
    """The lines of a Markdown table and a blank line after it. Cells are Markdown
    already (escape text with :func:`md` or :func:`code`); the columns whose index is
    in ``right`` are right-aligned (numbers), the others left-aligned."""
    align = ("---:" if i in right else "---" for i in range(len(header)))
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]
