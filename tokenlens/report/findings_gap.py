"""FINDINGS.md's Japanese − English gap: its split into shared composition, shared
within and out of support, the differences within classes, rejections by kind and
the gap per domain (the context of ``templates/findings.md``).

Each drafter family is read on its own: pooling them would turn each method's share
of rows into composition.
"""

from __future__ import annotations

from typing import Any

from tokenlens import format as fmt
from tokenlens.analysis import rejection_rows
from tokenlens.analysis.standardise import COLUMN as LENGTH_COLUMN
from tokenlens.analysis.summary_figures import Split, Support
from tokenlens.analysis.summary_file import Summary
from tokenlens.analysis.summary_gaps import Family
from tokenlens.analysis.summary_sections import DomainGap, Heterogeneity
from tokenlens.analysis.token_classes import class_label, decomposed
from tokenlens.analysis.wording import runs_phrase
from tokenlens.report.findings_runs import family_words

PARTS = (
    ("composition", "shared composition"),
    ("within", "shared within"),
    ("out_of_support", "out of support"),
)
# (decomposition column, what it splits by): token byte length (standardise.py's own
# split), then the token-class table's decomposed columns in their order.
DECOMPOSITIONS: tuple[tuple[str, str], ...] = (
    (LENGTH_COLUMN, class_label("bytes_bucket")),
    *((column, class_label(column)) for column in decomposed()),
)
TOP_CLASSES = 8  # exploratory classes shown (the rest are in summary.json)


def short_gaps(s: Summary) -> list[dict[str, str]]:
    """ "In short": each family's judged gap, and its split by the target's confidence."""
    return [
        {
            "family": family_words(name),
            "configurations": fmt.md(runs_phrase(family.configurations)),
            "gap": fmt.interval(family.gap_judged, "pp"),
            "confidence": ""
            if family.confidence is None
            else ", ".join(
                f"{label} {fmt.interval(family.confidence.part(part), 'pp')}"
                for part, label in PARTS
            ),
            "standardised": ""
            if family.gap_length_standardised is None
            else fmt.interval(family.gap_length_standardised, "pp"),
        }
        for name, family in s.families.items()
        if family.gap_judged is not None
    ]


def gap(s: Summary) -> dict[str, Any] | None:
    """The gap and its splits: by the target's confidence per family, and by each
    decomposition of the pooled family (None: no Japanese and English runs)."""
    if s.gap is None and not s.families:
        return None
    rows: list[list[str]] = []
    notes: list[str] = []
    for name, family in s.families.items():
        if family.confidence is not None:
            label = f"target's confidence, {family_words(name)}"
            rows.append(_split_row(label, family.confidence, notes))
    pooled = None
    g = s.gap
    if g is not None:
        name = family_words(g.family)
        fam = s.families.get(str(g.family)) or Family(name=str(g.family))
        pooled = {
            "family": name,
            "overall": fmt.interval(g.overall, "pp"),
            "overall_n": fmt.md(fmt.or_missing(g.overall.n if g.overall else None)),
            "configurations": fmt.md(runs_phrase(fam.configurations)) if len(fam.ks) > 1 else "",
            "judged": fmt.interval(g.judged, "pp"),
            "judged_n": fmt.md(fmt.or_missing(g.judged.n if g.judged else None)),
            "relative": fmt.interval(g.relative_judged, "pct"),
            "h2_contrast": None
            if s.h2_contrast is None
            else fmt.interval(s.h2_contrast.difference, "pp"),
        }
        for column, label in DECOMPOSITIONS:
            if column in g.decomposition:
                rows.append(_split_row(f"{label}, {name}", g.decomposition[column], notes))
    standardised = []
    for name, family in s.families.items():
        if family.gap_length_standardised is None:
            continue
        by = family.gap_length_standardised.by_standard
        standardised.append(
            {
                "family": family_words(name),
                "gap": fmt.interval(family.gap_length_standardised, "pp"),
                "japanese": fmt.interval(by.get("japanese"), "pp") if by else "",
                "english": fmt.interval(by.get("english"), "pp") if by else "",
            }
        )
    return {
        "pooled": pooled,
        "rows": rows,
        "notes": notes,
        "standardised": standardised,
        "within_range": within_range(s),
    }


def within_range(s: Summary) -> str:
    """How far the *within* part of the primary family's gap moves with the stratifier:
    its smallest and largest estimate over the splits that could be estimated ("" with
    fewer than two)."""
    g = s.gap
    if g is None:
        return ""
    found: list[tuple[float, str]] = []
    fam = s.families.get(str(g.family))
    splits = [(class_label("conf_bucket"), fam.confidence if fam else None)]
    splits += [(label, g.decomposition.get(column)) for column, label in DECOMPOSITIONS]
    for label, split in splits:
        part = split.part("within") if split is not None and not split.not_estimable else None
        if part is not None and part.value is not None:
            found.append((float(part.value), label))
    if len(found) < 2:
        return ""
    low, high = min(found), max(found)
    return (
        f"The *within* part of the {family_words(g.family)}' gap moves with the stratifier: "
        f"from {fmt.qty(low[0], 'pp')} (by {low[1]}) to {fmt.qty(high[0], 'pp')} "
        f"(by {high[1]}), over the {len(found)} splits that could be estimated: it is a "
        "property of the split, not of the languages, and no single split's within part "
        "is the language effect."
    )


def _split_row(label: str, split: Split, notes: list[str]) -> list[str]:
    """One row of the split table; a split the data cannot support gets a numbered note
    with the reason instead of three copies of it."""
    support = split.support or Support()
    if split.not_estimable:
        notes.append(f"{label}: {fmt.md(split.not_estimable)}")
        parts = [f"not estimable ({len(notes)})"] * len(PARTS)
    else:
        parts = [fmt.interval(split.part(part), "pp") for part, _ in PARTS]
    return [
        label,
        fmt.md(fmt.or_missing(split.gap.n if split.gap is not None else None)),
        fmt.interval(split.gap, "pp"),
        *parts,
        fmt.num(1.0 - support.share_ja, "share") if support.share_ja is not None else fmt.MISSING,
        fmt.num(1.0 - support.share_en, "share") if support.share_en is not None else fmt.MISSING,
    ]


def classes(s: Summary) -> list[list[str]] | None:
    """The declared class breakdowns as JA − EN differences, per family: the compared
    classes whose Holm-adjusted p is below 5%, and what could not be compared (None:
    the summary has none)."""
    if s.classes is None or not s.classes.families:
        return None
    rows = []
    for name, fam in s.classes.families.items():
        for column, table in fam.by.items():
            found = [
                c
                for c in table.classes
                if c.difference is not None
                and c.difference.p_holm is not None
                and c.difference.p_holm < 0.05
            ]
            one = [c for c in table.classes if c.status in ("only_ja", "only_en")]
            apart = [c for c in table.classes if c.status == "per_language"]
            detail = (
                ", ".join(
                    f"{f'p{c.cls}' if column == 'position' else fmt.code(c.cls, table=True)} "
                    f"{fmt.interval(c.difference, 'pp')} (Holm p "
                    f"{fmt.num(c.difference.p_holm if c.difference else None, 'rate')})"
                    for c in found
                )
                or "no class"
            )
            rows.append(
                [
                    family_words(name),
                    fmt.md(class_label(column)),
                    fmt.md(fmt.or_missing(table.comparisons)),
                    detail,
                    ", ".join(
                        f"{fmt.code(c.cls, table=True)} (JA {fmt.num(_rate(c.rate_ja), 'rate')}, "
                        f"EN {fmt.num(_rate(c.rate_en), 'rate')})"
                        for c in apart
                    )
                    or "none",
                    fmt.md(len(one)),
                ]
            )
    return rows


def _rate(rate: Any) -> float | None:
    return None if rate is None else rate.rate


def per_language(s: Summary) -> list[str]:
    """The classes not contrasted because their tokens differ in kind, with why (one
    line per class and breakdown, from the first family that has them)."""
    seen: dict[tuple[str, str], str] = {}
    if s.classes is None:
        return []
    for fam in s.classes.families.values():
        for column, table in fam.by.items():
            for c in table.classes:
                if c.status == "per_language" and c.not_contrasted:
                    seen.setdefault((column, str(c.cls)), c.not_contrasted)
    return [
        f"{fmt.md(class_label(col))} {fmt.code(cls)}: {fmt.md(why)}"
        for (col, cls), why in seen.items()
    ]


def explore(s: Summary) -> dict[str, Any] | None:
    """The exploratory search's largest differences (None: no search in the summary)."""
    found = s.gap.explore if s.gap is not None else None
    if found is None or not found.classes:
        return None
    shown = found.classes[:TOP_CLASSES]
    return {
        "shown": len(shown),
        "comparisons": fmt.md(found.comparisons),
        "more": len(found.classes) - len(shown),
        "level": fmt.num(found.level, "rate"),
        "rows": [
            [
                family_words(c.family),
                fmt.md(c.by),
                fmt.md(c.cls),
                fmt.md(c.rows_ja),
                fmt.md(c.rows_en),
                fmt.num(c.rate_ja, "rate"),
                fmt.num(c.rate_en, "rate"),
                fmt.interval(c.difference, "pp"),
                fmt.num(c.difference.p_adjusted if c.difference else None, "rate"),
            ]
            for c in shown
        ],
    }


def short_rejections(s: Summary) -> list[dict[str, Any]]:
    """ "In short": the re-segmentation share per language and family where both
    languages have one, a lower bound where the family's continuation is unknown (an
    older file: its looser ``split`` share, said so)."""
    lines = []
    for name, fam in s.rejections.items():
        legacy = fam.legacy
        shares = rejection_rows.short_shares(fam, "split" if legacy else "resegmentation")
        if shares is None:
            continue
        open_runs = rejection_rows.open_runs(s.rejection_runs, name)
        lines.append(
            {
                "family": family_words(name),
                "legacy": legacy,
                "shares": shares,
                "gap": fmt.interval(rejection_rows.gap(fam), "pp"),
                "open": ", ".join(open_runs),
                "prefix_open": rejection_rows.short_shares(fam, "prefix_open") or "",
                "whitespace": rejection_rows.short_shares(fam, "resegmentation_whitespace") or "",
            }
        )
    return lines


def rejections(s: Summary) -> dict[str, Any]:
    """Rejections by kind per family and language and per run, and each family's
    JA − EN difference of the re-segmentation share."""
    fams = s.rejections
    if not fams:
        return {"families": None, "runs": None, "gaps": []}
    legacy = all(b.legacy for b in fams.values())

    def family_label(name: str, _block: Any) -> str:
        return family_words(name)

    runs = s.rejection_runs
    return {
        "legacy": legacy,
        "definition": rejection_rows.LEGACY_DEFINITION if legacy else rejection_rows.DEFINITION,
        "families": {
            "header": rejection_rows.header(fams, "family"),
            "rows": rejection_rows.rows(fams, family_label),
        },
        "runs": {
            "header": rejection_rows.header(runs, "run"),
            "rows": rejection_rows.rows(runs, rejection_rows.run_label),
        }
        if runs
        else None,
        "gaps": [
            (family_words(name), fmt.interval(rejection_rows.gap(fam), "pp"))
            for name, fam in fams.items()
        ],
    }


def short_domains(s: Summary) -> list[dict[str, Any]]:
    """ "In short": the domains that depart from the pooled reading or do not share it,
    and the families whose domains differ (permutation p below 5%)."""
    lines: list[dict[str, Any]] = []
    for name, fam in s.domains.items():
        for kind, notes in (("departs", fam.departures), ("concern", fam.concerns)):
            for domain in (note.domain for note in notes if note.domain in fam.domains):
                lines.append(
                    {
                        "kind": kind,
                        "family": family_words(name),
                        "pooled": fmt.md(fam.pooled_reading),
                        **_domain(fam.domains[domain], fmt.md(domain)),
                    }
                )
        het = fam.heterogeneity
        if het is not None and het.p is not None and het.p < 0.05:
            without = _het(fam.heterogeneity_without_cross_lingual)
            lines.append(
                {
                    "kind": "differ",
                    "family": family_words(name),
                    **_spread(het),
                    "without": without if without and not without["not_estimable"] else None,
                }
            )
    return lines


def domains(s: Summary) -> list[dict[str, Any]]:
    """Per family: the gap per domain with its adjusted decision interval and reading,
    and the heterogeneity test."""
    sections = []
    for name, fam in s.domains.items():
        het = fam.heterogeneity
        sections.append(
            {
                "family": family_words(name),
                "rows": [
                    [d["domain"], d["pairs"], d["gap"], f"{d['low']} to {d['high']}", d["reading"]]
                    for d in (_domain(g, fmt.md(domain)) for domain, g in fam.domains.items())
                ],
                "heterogeneity": _het(het),
                "without": _het(fam.heterogeneity_without_cross_lingual),
                "directions": [
                    f"{fmt.md(domain)}: "
                    + ", ".join(
                        f"{fmt.lang_name(lang)} outputs {_direction(way)}"
                        for lang, way in g.direction.items()
                    )
                    for domain, g in fam.domains.items()
                    if g.direction
                ],
            }
        )
    return sections


def _direction(way: str) -> str:
    """``en-ja`` -> ``translate English into Japanese``."""
    names = {lang: fmt.lang_name(lang) for lang in ("ja", "en")}
    source, _, target = way.partition("-")
    if source in names and target in names:
        return f"translate {names[source]} into {names[target]} ({fmt.code(way)})"
    return fmt.md(way)


def _het(het: Heterogeneity | None) -> dict[str, Any] | None:
    if het is None:
        return None
    return {
        "not_estimable": fmt.md(het.not_estimable) if het.not_estimable else "",
        "permutations": fmt.md(het.permutations),
        "left_out": ", ".join(fmt.md(x) for x in het.left_out or ()),
        **_spread(het),
    }


def _domain(g: DomainGap, domain: str) -> dict[str, str]:
    return {
        "domain": domain,
        "pairs": fmt.md(g.pairs),
        "gap": fmt.interval(g, "pp"),
        "low": fmt.num(g.adjusted_low, "pp"),
        "high": fmt.qty(g.adjusted_high, "pp"),
        "reading": fmt.md(g.reading),
    }


def _spread(het: Heterogeneity) -> dict[str, str]:
    return {
        "spread": fmt.qty(het.spread, "pp").lstrip("+"),
        "chance": fmt.qty(het.chance_spread, "pp").lstrip("+"),
        "p": fmt.num(het.p, "rate"),
    }
