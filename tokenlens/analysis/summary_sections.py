"""summary.json's per-family sections as records: rejections (per family and per run),
acceptance by byte length, the gap per prompt domain, and δ in speed terms.

Read like every record (:mod:`~tokenlens.analysis.summary_fields`), the few fields kept
elsewhere in the file by hand; older forms stay readable (the first versions' ``split``
shares).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenlens.analysis.summary_fields import OMITTED, Figure, Section, as_map, json_value, read
from tokenlens.analysis.summary_figures import (
    Estimate,
    Rate,
    Share,
    rates,
)

# The rejection kinds (tokenlens.analysis.rejections), the re-segmentation share, its
# whitespace part and the flags; "split" (T starts with D) is the first versions' kind,
# read from older files only.
REJECTION_KINDS = ("merge", "confirmed", "prefix_diverged", "prefix_open", "text")
REJECTION_SHARES = (
    *REJECTION_KINDS,
    "resegmentation",
    "resegmentation_whitespace",
    "draft_partial",
    "emitted_partial",
    "split",
)


@dataclass(frozen=True)
class RejectionFamily(Section):
    """Rejections of one drafter family (or one run): counts per language, the share of
    each kind and flag per language, and the JA − EN difference of the re-segmentation
    share. A file written before the kinds has ``split`` shares and ``split_gap``
    instead (:attr:`legacy`)."""

    runs: tuple[str, ...] = ()
    rejections: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)
    shares: dict[str, dict[str, Share]] = field(default_factory=dict)  # {kind: {lang: Share}}
    resegmentation_gap: Estimate | None = None
    split_gap: Estimate | None = None  # older files only

    @property
    def legacy(self) -> bool:
        """Written before the rejection kinds: only ``split``/``text`` shares."""
        return not any(self.shares.get(kind) for kind in REJECTION_KINDS[:4]) and bool(
            self.shares.get("split")
        )

    @classmethod
    def parse(cls, data: Any) -> RejectionFamily:
        d = as_map(data)
        shares = {}
        for kind in REJECTION_SHARES:
            if isinstance(d.get(kind), Mapping):  # a kind the file lacks stays out
                block = {}
                for lang, v in d[kind].items():
                    share = Share.parse(v)
                    if share is not None:
                        block[str(lang)] = share
                shares[kind] = block
        return read(cls, d, shares=shares)

    def to_json(self) -> dict[str, Any]:
        """``runs``, the counts, each kind's shares in :data:`REJECTION_SHARES` order
        (the kinds it has), then the re-segmentation gap (``split_gap`` where read)."""
        out: dict[str, Any] = {
            "runs": list(self.runs),
            "rejections": dict(self.rejections),
            "unknown": dict(self.unknown),
        }
        out |= {
            kind: json_value(self.shares[kind]) for kind in REJECTION_SHARES if kind in self.shares
        }
        out["resegmentation_gap"] = json_value(self.resegmentation_gap)
        if self.split_gap is not None:
            out["split_gap"] = self.split_gap.to_json()
        return out


@dataclass(frozen=True)
class RejectionRun(RejectionFamily):
    """Rejections of one run, and whether the drafter's drafts after a step's first
    rejection are known there (``continuation``: known, unknown, partly known, none
    proposed): where they are not, a re-segmentation can hide in ``prefix_open``."""

    method: str | None = None
    k: int | None = None
    family: str | None = None
    continuation: str | None = None
    later_drafts: int | None = None
    later_drafts_unknown: int | None = None

    @classmethod
    def parse(cls, data: Any) -> RejectionRun:
        base = RejectionFamily.parse(data)
        return read(cls, as_map(data), shares=base.shares)

    def to_json(self) -> dict[str, Any]:
        """The run's method, k, family and continuation, then the family block's keys."""
        return {
            "method": self.method,
            "k": self.k,
            "family": self.family,
            "continuation": self.continuation,
            "later_drafts": self.later_drafts,
            "later_drafts_unknown": self.later_drafts_unknown,
            **RejectionFamily.to_json(self),
        }


@dataclass(frozen=True)
class Rejections(Figure):
    """summary.json ``rejections``: the kinds and their definition, and the rejections
    of each drafter family and each run (:mod:`tokenlens.analysis.rejection_summary`)."""

    kinds: tuple[str, ...] = ()
    resegmentation: tuple[str, ...] = ()
    definition: str | None = None
    families: dict[str, RejectionFamily] = field(default_factory=dict)
    runs: dict[str, RejectionRun] = field(default_factory=dict)


@dataclass(frozen=True)
class ByteLength(Section):
    """Judged-position acceptance by the emitted token's UTF-8 byte length, one drafter
    family (pooled over its runs, as the verdicts read them): ``rates`` {lang: {bucket:
    Rate}}."""

    runs: tuple[str, ...] = ()
    configurations: tuple[tuple[str, int], ...] = ()
    rates: dict[str, dict[str, Rate]] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: Any) -> ByteLength:
        d = as_map(data)
        by_lang = {str(lang): rates(groups) for lang, groups in as_map(d.get("rates")).items()}
        return read(cls, d, rates=by_lang)


@dataclass(frozen=True)
class DomainGap(Section):
    """The judged gap of one domain: its 95% interval (a reason where it has none),
    the rows and rates behind it, the decision and the Bonferroni-adjusted decision
    interval, the reading against −δ on the latter, and for a cross-lingual domain each
    language's ``direction`` (``en-ja``)."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    not_estimable: str | None = field(default=None, metadata=OMITTED)
    no_interval: str | None = field(default=None, metadata=OMITTED)
    pairs: int | None = None
    rows_ja: int | None = None
    rows_en: int | None = None
    rate_ja: float | None = None
    rate_en: float | None = None
    decision_low: float | None = None
    decision_high: float | None = None
    adjusted_low: float | None = None
    adjusted_high: float | None = None
    reading: str | None = None
    direction: dict[str, str] | None = field(default=None, metadata=OMITTED)


@dataclass(frozen=True)
class DomainNote(Section):
    """A domain whose reading departs from (or does not settle) the pooled one."""

    domain: str | None = None
    reading: str | None = None
    pooled_reading: str | None = None


@dataclass(frozen=True)
class Heterogeneity(Figure):
    """Whether the gap differs between domains: a permutation test of the domain labels
    over prompt pairs (``spread`` against ``chance_spread``); ``not_estimable`` (why)
    instead of the figures where it cannot run; ``left_out``: the domains the test
    without cross-lingual ones leaves out. Keys without a value are not written."""

    left_out: tuple[str, ...] | None = field(default=None, metadata=OMITTED)
    test: str | None = None
    statistic: str | None = None
    why: str | None = None
    not_estimable: str | None = field(default=None, metadata=OMITTED)
    value: float | None = field(default=None, metadata=OMITTED)
    spread: float | None = field(default=None, metadata=OMITTED)
    chance_spread: float | None = field(default=None, metadata=OMITTED)
    p: float | None = field(default=None, metadata=OMITTED)
    permutations: int | None = field(default=None, metadata=OMITTED)
    domains: int | None = field(default=None, metadata=OMITTED)
    pairs: int | None = field(default=None, metadata=OMITTED)
    rows: int | None = field(default=None, metadata=OMITTED)


@dataclass(frozen=True)
class DomainFamily(Section):
    """The judged gap per prompt domain of one drafter family: each domain's
    :class:`DomainGap` (its reading on the interval adjusted to ``adjusted_level``), the
    family's pooled gap and reading, the domains that depart from it or do not settle,
    and the heterogeneity test (also without the cross-lingual domains, when any)."""

    adjusted_level: float | None = None
    domains: dict[str, DomainGap] = field(default_factory=dict)
    pooled: Estimate | None = None
    pooled_reading: str | None = None
    departures: tuple[DomainNote, ...] = ()
    concerns: tuple[DomainNote, ...] = ()
    heterogeneity: Heterogeneity | None = None
    heterogeneity_without_cross_lingual: Heterogeneity | None = field(
        default=None, metadata=OMITTED
    )


@dataclass(frozen=True)
class Domains(Figure):
    """summary.json ``domains``: where the domain labels come from (``source``) and the
    gap per domain of each drafter family."""

    source: str | None = None
    families: dict[str, DomainFamily] = field(default_factory=dict)


@dataclass(frozen=True)
class SpeedMargin(Section):
    """What an acceptance δ below ``acceptance`` costs at ``k`` by the i.i.d. formula:
    tokens per step at both rates, their ``difference``, and the relative change of
    speed (:func:`tokenlens.analysis.speed.margin_in_speed` builds it)."""

    k: int | None = None
    acceptance: float | None = None
    delta: float | None = None
    tokens_per_step: float | None = None
    tokens_per_step_at_minus_delta: float | None = None
    difference: float | None = None
    relative_speed: float | None = None


@dataclass(frozen=True)
class MarginInSpeed(Figure):
    """summary.json ``margin_in_speed``: δ in speed terms per drafter family and k
    (``{family: {k: SpeedMargin}}``), and the ``basis`` it was computed on."""

    basis: str | None = None
    families: dict[str, dict[str, SpeedMargin]] = field(default_factory=dict)
