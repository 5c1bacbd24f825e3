"""summary.json's figures as records: a value with its interval (:class:`Estimate`),
a rate (:class:`Rate`, :class:`PositionRate`), a share, a split of the gap, a verdict's
check and power, and the declared class breakdowns (:class:`Classes`).

The analysis builds these and writes them with their ``to_json``; the readers parse
the same types (a figure a file lacks is None), and :mod:`tokenlens.format` prints them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from tokenlens.analysis.summary_fields import OMITTED, Figure, Section, renamed


@dataclass(frozen=True)
class Estimate(Figure):
    """A figure with its interval (a gap, a part of the split, tokens per step): the
    record the analysis builds (:func:`tokenlens.analysis.bootstrap.estimate`), writes
    (:meth:`to_json`) and reads back (``Estimate.parse``), one type for all three.
    ``value`` is None with a ``not_estimable`` reason when the data cannot support it;
    ``no_interval`` says why a value has no interval; ``decision_low``/``decision_high``
    are the interval a verdict reads; ``p_adjusted`` is the Holm p of an exploratory
    comparison; ``pooled_over_k`` and ``family`` label a figure that pools runs of
    several k (written last, only when set)."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    not_estimable: str | None = None
    no_interval: str | None = None
    p_adjusted: float | None = None
    decision_low: float | None = None
    decision_high: float | None = None
    pooled_over_k: tuple[int, ...] | None = None
    family: str | None = None

    def to_json(self, name: str = "value") -> dict[str, Any]:
        """``{<name>, ci_low, ci_high, n}``, then ``decision_low``/``decision_high`` when
        both are set, then the reason (``not_estimable`` or ``no_interval``) when there
        is one. ``name``: the key of the value (``rate`` and ``share`` are read back as
        :class:`Rate` and :class:`Share`)."""
        out: dict[str, Any] = {
            name: self.value,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "n": self.n,
        }
        if self.decision_low is not None and self.decision_high is not None:
            out["decision_low"] = self.decision_low
            out["decision_high"] = self.decision_high
        if self.not_estimable is not None:
            out["not_estimable"] = self.not_estimable
        elif self.no_interval is not None:
            out["no_interval"] = self.no_interval
        return out | self._labels()

    def _labels(self) -> dict[str, Any]:
        """``pooled_over_k`` and ``family`` where set: the keys a figure ends with."""
        out: dict[str, Any] = {}
        if self.pooled_over_k is not None:
            out["pooled_over_k"] = list(self.pooled_over_k)
        if self.family is not None:
            out["family"] = self.family
        return out

    @property
    def has_interval(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None


@dataclass(frozen=True)
class Rate(Figure):
    """An acceptance rate with its interval: ``accepted`` of ``n`` rows from
    ``requests`` prompts; ``sparse`` when fewer rows than min_count. Built by the
    analysis (:meth:`of`), written (:meth:`to_json`) and read back as this type."""

    rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    accepted: int | None = None
    requests: int | None = None
    sparse: bool | None = None
    not_estimable: str | None = None
    no_interval: str | None = None
    pooled_over_k: tuple[int, ...] | None = None
    family: str | None = None

    @classmethod
    def of(cls, estimate: Estimate, accepted: int, requests: int, sparse: bool) -> Rate:
        """The rate ``estimate`` with its counts."""
        return cls(
            estimate.value,
            estimate.ci_low,
            estimate.ci_high,
            estimate.n,
            accepted,
            requests,
            sparse,
            estimate.not_estimable,
            estimate.no_interval,
        )

    def to_json(self) -> dict[str, Any]:
        """The estimate's keys (value at ``rate``), accepted, requests, sparse, then the
        pooled-over-k labels where set."""
        figure = Estimate(
            self.rate,
            self.ci_low,
            self.ci_high,
            self.n,
            self.not_estimable,
            self.no_interval,
        )
        labels = Estimate(pooled_over_k=self.pooled_over_k, family=self.family)._labels()
        return {
            **figure.to_json("rate"),
            "accepted": self.accepted,
            "requests": self.requests,
            "sparse": self.sparse,
            **labels,
        }


@dataclass(frozen=True)
class PositionRate(Rate):
    """A rate at one draft position p (over the steps with a draft at p), with
    ``per_draft``: accepted at p / all the run's steps (vLLM's per-position counter over
    ``num_drafts``), and ``drafts``: those steps. Older files lack both (None)."""

    per_draft: float | None = None
    drafts: int | None = None

    @classmethod
    def from_rate(cls, rate: Rate, per_draft: float | None, drafts: int) -> PositionRate:
        """``rate`` with the run's per-draft rate at its position and its step count."""
        given = {f.name: getattr(rate, f.name) for f in fields(rate)}
        return cls(**given, per_draft=per_draft, drafts=drafts)

    def to_json(self) -> dict[str, Any]:
        """The rate's keys, then ``per_draft`` and ``drafts`` (both always written)."""
        return {**super().to_json(), "per_draft": self.per_draft, "drafts": self.drafts}


def rates(data: Any) -> dict[str, Rate]:
    """``{lang: Rate}`` (or ``{group: Rate}``), entries that are not rates left out."""
    out = {}
    for key, value in (data if isinstance(data, Mapping) else {}).items():
        rate = Rate.parse(value)
        if rate is not None:
            out[str(key)] = rate
    return out


def position_rates(data: Any) -> dict[str, Rate]:
    """``{position: PositionRate}``, entries that are not rates left out."""
    out: dict[str, Rate] = {}
    for key, value in (data if isinstance(data, Mapping) else {}).items():
        rate = PositionRate.parse(value)
        if rate is not None:
            out[str(key)] = rate
    return out


@dataclass(frozen=True)
class Support(Figure):
    """Share of each language's judged rows in the classes both languages fill, and how
    many of the ``classes_total`` classes (``classes``) both fill."""

    share_ja: float | None = None
    share_en: float | None = None
    classes: int | None = None
    classes_total: int | None = None


@dataclass(frozen=True)
class SplitClass(Section):
    """One class of a split: both languages' rows, shares and rates, and its parts of
    the gap (``composition`` and ``within`` for a shared class, ``out_of_support`` for
    one outside support; none when the split is not estimable)."""

    cls: str | None = renamed("class")
    shared: bool | None = None
    share_ja: float | None = None
    share_en: float | None = None
    rows_ja: int | None = None
    rows_en: int | None = None
    rate_ja: float | None = None
    rate_en: float | None = None
    composition: Estimate | None = field(default=None, metadata=OMITTED)
    within: Estimate | None = field(default=None, metadata=OMITTED)
    out_of_support: Estimate | None = field(default=None, metadata=OMITTED)


@dataclass(frozen=True)
class Split(Figure):
    """gap = composition + within + out_of_support by one ``column``, with each
    class's part (``classes``); ``not_estimable`` (why) when too little of the data lies
    in shared classes. Built by :func:`tokenlens.analysis.decompose.decompose`."""

    column: str | None = None
    gap: Estimate | None = None
    support: Support | None = None
    composition: Estimate | None = None
    within: Estimate | None = None
    out_of_support: Estimate | None = None
    not_estimable: str | None = field(default=None, metadata=OMITTED)
    classes: tuple[SplitClass, ...] = ()

    PARTS = ("composition", "within", "out_of_support")

    def part(self, name: str) -> Estimate | None:
        """``gap``, ``composition``, ``within`` or ``out_of_support`` by name."""
        value = getattr(self, name)
        return value if isinstance(value, Estimate) else None


@dataclass(frozen=True)
class LengthStandardised(Estimate):
    """The judged gap standardised by token byte length (the estimate itself), with
    the ``method``, the split's ``composition``, ``out_of_support`` and ``support``, and
    the gap under each language's own length shares (``by_standard``: ``japanese``,
    ``english``). A gap that cannot be estimated has the reason and the method only."""

    method: str | None = None
    composition: Estimate | None = None
    out_of_support: Estimate | None = None
    support: Support | None = None
    by_standard: dict[str, Estimate] = field(default_factory=dict)

    def to_json(self, name: str = "value") -> dict[str, Any]:
        """The estimate's keys, ``method``, the parts present (None and empty left out,
        as :func:`tokenlens.analysis.standardise.length_standardised` writes), then the
        pooled-over-k labels."""
        labels = self._labels()
        out = {k: v for k, v in super().to_json(name).items() if k not in labels}
        out["method"] = self.method
        for key in ("composition", "out_of_support", "support"):
            part = getattr(self, key)
            if part is not None:
                out[key] = part.to_json()
        if self.by_standard:
            out["by_standard"] = {k: v.to_json() for k, v in self.by_standard.items()}
        return out | labels


@dataclass(frozen=True)
class Difference(Figure):
    """A JA − EN difference of one class: 95% interval, p, Holm p and the Bonferroni
    (simultaneous) interval within its family of comparisons."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    p: float | None = None
    p_holm: float | None = None
    adjusted_low: float | None = None
    adjusted_high: float | None = None


@dataclass(frozen=True)
class Share(Figure):
    """A share of rejections (``count`` of ``n``) with its interval."""

    share: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    count: int | None = None
    not_estimable: str | None = None
    no_interval: str | None = None

    @classmethod
    def of(cls, estimate: Estimate, count: int) -> Share:
        """The share ``estimate`` with the count of rejections it holds."""
        return cls(
            estimate.value,
            estimate.ci_low,
            estimate.ci_high,
            estimate.n,
            count,
            estimate.not_estimable,
            estimate.no_interval,
        )

    def to_json(self) -> dict[str, Any]:
        """The estimate's keys (value at ``share``), then ``count``."""
        figure = Estimate(
            self.share,
            self.ci_low,
            self.ci_high,
            self.n,
            self.not_estimable,
            self.no_interval,
        )
        return {**figure.to_json("share"), "count": self.count}


# --- the declared class breakdowns: JA − EN differences per class ----------------------


@dataclass(frozen=True)
class ClassEntry(Section):
    """One class of a declared breakdown: ``status`` is ``compared``, ``per_language``
    (both fill it with different kinds of token: not contrasted), ``only_ja``,
    ``only_en`` (one language fills it: not compared) or ``sparse``."""

    cls: str | None = renamed("class")
    status: str | None = None
    rows_ja: int | None = None
    rows_en: int | None = None
    prompts_ja: int | None = None
    prompts_en: int | None = None
    rate_ja: Rate | None = None
    rate_en: Rate | None = None
    # compared and per_language classes: each language's share of tokens the other has
    shared_tokens: dict[str, float | None] | None = field(default=None, metadata=OMITTED)
    # per_language classes: why (their tokens differ in kind)
    not_contrasted: str | None = field(default=None, metadata=OMITTED)
    difference: Difference | None = field(default=None, metadata=OMITTED)  # compared only


@dataclass(frozen=True)
class ClassTable(Section):
    """One family of comparisons: a drafter family x a breakdown."""

    column: str | None = None
    comparisons: int | None = None
    adjusted_level: float | None = None
    classes: tuple[ClassEntry, ...] = ()


@dataclass(frozen=True)
class ClassFamily(Section):
    runs: tuple[str, ...] = ()
    ks: tuple[int, ...] = ()
    by: dict[str, ClassTable] = field(default_factory=dict)


@dataclass(frozen=True)
class Classes(Figure):
    """The declared class breakdowns as JA − EN differences, per drafter family."""

    adjustment: str | None = None
    level: float | None = None
    family_of_comparisons: str | None = None
    declared: str | None = None  # when the families of comparisons were declared
    families: dict[str, ClassFamily] = field(default_factory=dict)
