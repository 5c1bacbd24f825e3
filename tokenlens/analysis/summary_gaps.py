"""summary.json's gap sections as records: ``families`` (:class:`Family`),
``h2_contrast`` (:class:`Contrast`) and ``gap`` (:class:`Gap`).

The analysis builds them (:func:`tokenlens.analysis.parts.compute_parts`,
:mod:`~tokenlens.analysis.summarize`) and writes them with ``to_json``; the reader
(:func:`~tokenlens.analysis.summary_file.parse_summary`) reads the same types. A key is
declared once, here; older files read (a missing key is None or empty).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenlens.analysis.summary_fields import OMITTED, OUTSIDE, Figure, Section, renamed
from tokenlens.analysis.summary_figures import Estimate, LengthStandardised, Rate, Split


@dataclass(frozen=True)
class Control(Figure):
    """Whether H2's control was read: its measured violation (the training-free
    drafter's within-confidence gap) against ``range`` (from ``source``); ``reason``
    when it was not."""

    range: float | None = None
    source: str | None = None
    violation: float | None = None
    holds: bool | None = None
    reason: str | None = None


@dataclass(frozen=True)
class ContrastSupport(Figure):
    """Each language x drafter cell's share of judged rows in the bins all four fill,
    and how many of ``bins_total`` bins (``bins``) they all fill."""

    share_trained_ja: float | None = None
    share_trained_en: float | None = None
    share_training_free_ja: float | None = None
    share_training_free_en: float | None = None
    bins: int | None = None
    bins_total: int | None = None


@dataclass(frozen=True)
class ControlledDifference(Estimate):
    """H2's difference in differences; where its control does not hold, null with the
    reason, the measured ``violation`` and the computed figure kept as ``unchecked``."""

    violation: float | None = None
    unchecked: Estimate | None = None

    def to_json(self, name: str = "value") -> dict[str, Any]:
        """The estimate's keys, then ``violation`` and ``unchecked`` when unchecked."""
        out = Estimate.to_json(self, name)
        if self.unchecked is not None:
            out |= {"violation": self.violation, "unchecked": self.unchecked.to_json()}
        return out


@dataclass(frozen=True)
class Contrast(Figure):
    """H2's contrast (``h2_contrast``): the within-confidence gap, trained minus
    training-free, on the confidence ``bins`` all four cells share; every part null
    with ``not_estimable`` (why) when they share too few. Built by
    :func:`tokenlens.analysis.decompose.did` and :func:`tokenlens.analysis.rules.apply_control`."""

    support: ContrastSupport | None = None
    difference: ControlledDifference | None = None
    within_trained: Estimate | None = None
    within_training_free: Estimate | None = None
    not_estimable: str | None = field(default=None, metadata=OMITTED)
    correlation: dict[str, float | None] | None = field(default=None, metadata=OMITTED)
    bins: tuple[str, ...] = ()
    control: Control | None = field(default=None, metadata=OMITTED)


@dataclass(frozen=True)
class Family(Section):
    """One drafter family (``trained`` or ``training_free``; ``name``, the key, is not
    written inside) pooled over its runs. ``gap_judged`` None: the family lacks one
    language, and its gaps, split and standardised gap are not written."""

    name: str = field(default="", metadata=OUTSIDE)
    methods: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()
    configurations: tuple[tuple[str, int], ...] = ()
    acceptance: dict[str, Rate] = field(default_factory=dict)
    acceptance_judged: dict[str, Rate] = field(default_factory=dict)
    prompts: dict[str, int] = field(default_factory=dict)
    gap_judged: Estimate | None = None
    gap_all: Estimate | None = None
    confidence: Split | None = None
    gap_length_standardised: LengthStandardised | None = None

    GAPS = ("gap_judged", "gap_all", "confidence", "gap_length_standardised")

    @property
    def ks(self) -> tuple[int, ...]:
        return tuple(sorted({k for _, k in self.configurations}))

    def to_json(self) -> dict[str, Any]:
        """Every field at its key; the four gap keys (nulls included) only with a
        judged gap."""
        out = super().to_json()
        if self.gap_judged is None:
            out = {k: v for k, v in out.items() if k not in self.GAPS}
        return out


@dataclass(frozen=True)
class Adjusted(Estimate):
    """An exploratory JA − EN difference: value, 95% interval and Holm ``p_adjusted``
    (no row count)."""

    def to_json(self, name: str = "value") -> dict[str, Any]:
        return {
            name: self.value,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_adjusted": self.p_adjusted,
        }


@dataclass(frozen=True)
class Comparison(Section):
    """One exploratory class comparison (Japanese − English within a class)."""

    family: str | None = None
    by: str | None = None
    cls: str | None = renamed("class")  # the class ("class" in the file)
    rows_ja: int | None = None
    rows_en: int | None = None
    rate_ja: float | None = None
    rate_en: float | None = None
    difference: Adjusted | None = None


@dataclass(frozen=True)
class Explore(Figure):
    """The exploratory class comparisons, largest difference first."""

    adjustment: str | None = None
    level: float | None = None
    comparisons: int | None = None
    classes: tuple[Comparison, ...] = ()


@dataclass(frozen=True)
class Gap(Figure):
    """``gap``: the Japanese − English gap of one ``family`` and its descriptive
    splits by token class; ``regression`` (kept as written) with --regression only."""

    family: str | None = None
    overall: Estimate | None = None
    judged: Estimate | None = None
    relative_judged: Estimate | None = None
    decomposition: dict[str, Split] = field(default_factory=dict)
    explore: Explore | None = None
    regression: dict[str, Any] | None = field(default=None, metadata=OMITTED)
