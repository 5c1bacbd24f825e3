"""The declared class breakdowns as Japanese − English differences, per drafter family.

:func:`class_gaps` returns summary.json's ``classes`` (:class:`Classes`): for each
drafter family (its judged rows, every k pooled) and each declared breakdown
(:data:`DECLARED`), every class with rows, its status and both languages' rates, and
for compared classes the JA − EN difference with its 95% prompt-pair interval, a
bootstrap-t p, the Holm p and the Bonferroni interval within the family of comparisons
(one drafter family × one breakdown). Status: ``compared``; ``only_ja`` / ``only_en``
(one language fills it: a class only Japanese has cannot be "harder in Japanese");
``per_language`` (both fill it with tokens of different kinds, :mod:`.comparable`:
shown per language with the reason, not contrasted); ``sparse``.

Why per class, not per language: the question is whether the *same* class fares worse
in Japanese. The families were declared on 2 December 2026, after the first full
study's exploratory search had been seen (``declared`` says so in the file).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from tokenlens.analysis.bootstrap import LEVEL, Resampler, as_float, interval, standard_error
from tokenlens.analysis.breakdown import group_codes, rate_table
from tokenlens.analysis.columns import labels
from tokenlens.analysis.comparable import not_comparable, shared_token_share
from tokenlens.analysis.decompose import Support, lang_code
from tokenlens.analysis.summary_figures import (
    ClassEntry,
    Classes,
    ClassFamily,
    ClassTable,
    Difference,
)
from tokenlens.analysis.token_classes import declared
from tokenlens.arrays import F64, I64, Mask

DECLARED = declared()  # the token-class table's declared families, in declared order
ADJUSTMENT = "holm"
FAMILY_OF_COMPARISONS = (
    "one drafter family x one breakdown ("
    + ", ".join(DECLARED)
    + "; declared on 2 December 2026, after the first full study's exploratory search had "
    "been seen); Holm's adjustment and the Bonferroni intervals are within each"
)
DECLARED_WHEN = (
    "The breakdowns and their families of comparisons entered the code on 2 December "
    "2026 (commit bd8932b), after the first full study's report of 1 December (499e4be) "
    "had shown its exploratory search, whose two largest trained-drafter differences were "
    "spans (-22.2 pp) and mixed (-19.9 pp): they were not declared before the data."
)
COMPARED, ONLY_JA, ONLY_EN, SPARSE = "compared", "only_ja", "only_en", "sparse"
PER_LANGUAGE = "per_language"  # both languages fill it, with different kinds of token


@dataclass(frozen=True)
class Differences:
    """Per class of one column over some rows: counts, prompts, and the JA − EN
    difference of judged rates (point and replicates)."""

    labels: list[str]
    rows_ja: F64
    rows_en: F64
    prompts_ja: I64
    prompts_en: I64
    rate_ja: F64  # (classes,): judged rate, NaN where the language has no row
    rate_en: F64
    point: F64  # (classes,)
    boot: F64  # (B, classes)
    g: I64  # clusters with rows, per class
    h: I64  # strata among them, per class


def differences(frame: pd.DataFrame, rs: Resampler, rows: Mask, column: str) -> Differences:
    """JA − EN judged-rate difference per class of ``column`` over ``rows``."""
    code = lang_code(frame)
    gcode, labels = group_codes(frame, column)
    k = len(labels)
    keep = rows & (code >= 0) & (gcode >= 0)
    cell = np.where(keep, code * k + gcode, -1)
    acc = frame["accepted"].to_numpy(dtype=np.float64)
    num, den, cells = rs.counted(acc, cell, 2 * k, keep)
    prompts = cells.clusters()
    with np.errstate(divide="ignore", invalid="ignore"):
        rate_ja, rate_en = num.point[:k] / den.point[:k], num.point[k:] / den.point[k:]
        point = rate_ja - rate_en
        boot = num.boot[:, :k] / den.boot[:, :k] - num.boot[:, k:] / den.boot[:, k:]
    g, h = rs.group_design(np.where(keep, gcode, -1), k, keep)
    return Differences(
        labels=labels,
        rows_ja=den.point[:k],
        rows_en=den.point[k:],
        prompts_ja=prompts[:k],
        prompts_en=prompts[k:],
        rate_ja=np.asarray(rate_ja, dtype=np.float64),
        rate_en=np.asarray(rate_en, dtype=np.float64),
        point=np.asarray(point, dtype=np.float64),
        boot=np.asarray(boot, dtype=np.float64),
        g=g,
        h=h,
    )


def p_values(d: Differences, index: list[int]) -> F64:
    """Two-sided p-values of the differences ``index`` (t from the bootstrap SE)."""
    out = np.full(len(index), np.nan)
    for j, c in enumerate(index):
        se = float(standard_error(d.boot[:, c : c + 1], int(d.g[c]), int(d.h[c]))[0])
        if se > 0 and np.isfinite(se) and np.isfinite(d.point[c]):
            out[j] = 2.0 * stats.t.sf(abs(d.point[c]) / se, max(int(d.g[c] - d.h[c]), 1))
    return out


def holm(p: F64) -> F64:
    """Holm's step-down adjusted p-values (NaN stays NaN and is not counted)."""
    p = np.asarray(p, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adjusted = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(adjusted, 1.0)
    return out


def status(
    d: Differences, c: int, support: Support, min_count: int, column: str | None = None
) -> str:
    """Whether class ``c`` is compared, filled by one language only, or by neither; a
    class both languages fill with different kinds of token (:mod:`.comparable`) is
    ``per_language``."""
    fills = [
        rows >= min_count and prompts >= support.min_prompts
        for rows, prompts in (
            (d.rows_ja[c], d.prompts_ja[c]),
            (d.rows_en[c], d.prompts_en[c]),
        )
    ]
    if all(fills):
        return PER_LANGUAGE if not_comparable(column, d.labels[c]) else COMPARED
    if fills[0]:
        return ONLY_JA
    if fills[1]:
        return ONLY_EN
    return SPARSE


def class_table(
    frame: pd.DataFrame,
    rs: Resampler,
    rows: Mask,
    column: str,
    support: Support,
    min_count: int,
) -> ClassTable:
    """One family of comparisons: every class of ``column`` with rows among ``rows``,
    its status, rates per language, and for compared classes the JA − EN difference
    with its Holm p and simultaneous interval."""
    d = differences(frame, rs, rows, column)
    per_lang = rate_table(frame, rs, column, rows, min_count)
    marks = [status(d, c, support, min_count, column) for c in range(len(d.labels))]
    compared = [c for c, mark in enumerate(marks) if mark == COMPARED]
    m = len(compared)
    p_raw = p_values(d, compared)
    p_adj = holm(p_raw)
    adjusted_level = 1.0 - (1.0 - LEVEL) / m if m else None
    classes = []
    for c, label in enumerate(d.labels):
        if d.rows_ja[c] + d.rows_en[c] == 0:
            continue
        difference = None
        if marks[c] == COMPARED:
            j = compared.index(c)
            point = np.array([d.point[c]])
            boot = d.boot[:, c : c + 1]
            lo, hi = interval(point, boot, int(d.g[c]), int(d.h[c]), rs.method, LEVEL)
            assert adjusted_level is not None
            a_lo, a_hi = interval(point, boot, int(d.g[c]), int(d.h[c]), rs.method, adjusted_level)
            difference = Difference(
                value=as_float(d.point[c]),
                ci_low=as_float(lo[0]),
                ci_high=as_float(hi[0]),
                n=int(d.rows_ja[c] + d.rows_en[c]),
                p=as_float(p_raw[j]),
                p_holm=as_float(p_adj[j]),
                adjusted_low=as_float(a_lo[0]),
                adjusted_high=as_float(a_hi[0]),
            )
        classes.append(
            ClassEntry(
                cls=label,
                status=marks[c],
                rows_ja=int(d.rows_ja[c]),
                rows_en=int(d.rows_en[c]),
                prompts_ja=int(d.prompts_ja[c]),
                prompts_en=int(d.prompts_en[c]),
                rate_ja=per_lang.get("ja", {}).get(label),
                rate_en=per_lang.get("en", {}).get(label),
                shared_tokens=shared_token_share(frame, rows, column, label)
                if marks[c] in (COMPARED, PER_LANGUAGE)
                else None,
                not_contrasted=(
                    f"its tokens differ in kind across languages: {not_comparable(column, label)}"
                )
                if marks[c] == PER_LANGUAGE
                else None,
                difference=difference,
            )
        )
    return ClassTable(
        column=column, comparisons=m, adjusted_level=adjusted_level, classes=tuple(classes)
    )


def class_gaps(
    frame: pd.DataFrame,
    rs: Resampler,
    families: dict[str, Mask],
    judged: Mask,
    support: Support,
    min_count: int,
    columns: tuple[str, ...] = DECLARED,
) -> Classes:
    """The declared breakdowns (``columns``) per drafter family (``families``: row
    masks), each a family of comparisons over its judged rows (summary.json
    ``classes``)."""
    out: dict[str, ClassFamily] = {}
    for name, mask in families.items():
        rows = judged & mask
        out[name] = ClassFamily(
            runs=tuple(sorted(set(labels(frame, "run")[mask]))),
            ks=tuple(sorted({int(k) for k in frame["k"].to_numpy()[mask]})) if "k" in frame else (),
            by={
                column: class_table(frame, rs, rows, column, support, min_count)
                for column in columns
                if column in frame
            },
        )
    return Classes(
        adjustment=ADJUSTMENT,
        level=LEVEL,
        family_of_comparisons=FAMILY_OF_COMPARISONS,
        declared=DECLARED_WHEN,
        families=out,
    )
