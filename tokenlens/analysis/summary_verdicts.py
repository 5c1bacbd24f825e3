"""summary.json's ``hypotheses`` as records: :class:`Hypothesis` with its
:class:`Check`, :class:`Power` and :class:`Sensitivity`.

Built by :mod:`tokenlens.analysis.verdicts` and :mod:`tokenlens.analysis.sensitivity`,
written by ``to_json`` and read back into the same types; a key is declared once, here.
Older files read (a missing key is None or empty).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokenlens.analysis.summary_fields import OMITTED, Figure, Section, json_value
from tokenlens.analysis.summary_figures import Estimate
from tokenlens.analysis.summary_gaps import Control


@dataclass(frozen=True)
class Check(Estimate):
    """The second interval a verdict reads (``name``), and how the rule read it."""

    name: str | None = None
    reading: str | None = None

    def to_json(self, name: str = "value") -> dict[str, Any]:
        """``name``, the estimate's keys, then ``reading``."""
        return {"name": self.name, **Estimate.to_json(self, name), "reading": self.reading}


@dataclass(frozen=True)
class Power(Figure):
    """The minimum detectable effect (``mde``) and the prompts per language an effect of
    each size (the key, as written: ``"0.05"``) needs; ``rule`` says what it models.
    Three forms, each written as built: H1's effect alone
    (:func:`~tokenlens.analysis.power.effect_power`), H2's conjunction
    (:func:`~tokenlens.analysis.power.power_conjunction`), and not read (``power``
    None: ``not_estimable`` and ``rule`` only)."""

    power: float | None = None
    prompts_per_language: int | None = None
    rule: str | None = None
    se: float | None = None
    mde_effect_alone: float | None = None
    se_check: float | None = None
    correlation: float | None = None
    mde: float | None = None
    prompts_needed: dict[str, int | None] | None = None
    power_at: dict[str, float | None] | None = None
    not_estimable: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The keys of this power's form, in the order its builder writes them."""
        if self.power is None:
            return {"not_estimable": self.not_estimable, "rule": self.rule}
        out: dict[str, Any] = {
            "power": self.power,
            "prompts_per_language": self.prompts_per_language,
        }
        needed = json_value(self.prompts_needed)
        if not (self.rule or "").startswith("conjunction"):
            out |= {"se": self.se, "mde": self.mde, "prompts_needed": needed}
            if self.not_estimable is not None:
                out["not_estimable"] = self.not_estimable
            return out | {"rule": self.rule}
        out |= {"rule": self.rule, "se": self.se, "mde_effect_alone": self.mde_effect_alone}
        if self.not_estimable is not None:
            return out | {
                "mde": self.mde,
                "prompts_needed": needed,
                "power_at": self.power_at,
                "not_estimable": self.not_estimable,
            }
        return out | {
            "se_check": self.se_check,
            "correlation": self.correlation,
            "mde": self.mde,
            "power_at": self.power_at,
            "prompts_needed": needed,
        }


@dataclass(frozen=True)
class Reading(Figure):
    """One figure of a sensitivity entry: its value and the interval the rule read
    (the keys the figure has: :func:`tokenlens.analysis.sensitivity._figure`)."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    decision_low: float | None = field(default=None, metadata=OMITTED)
    decision_high: float | None = field(default=None, metadata=OMITTED)
    not_estimable: str | None = field(default=None, metadata=OMITTED)


@dataclass(frozen=True)
class PerK(Section):
    """The verdict of one k's runs alone, judged and on vLLM's all-token rate."""

    verdict: str | None = None
    verdict_all_tokens: str | None = None
    gap: Reading | None = None
    gap_all: Reading | None = None
    effect: Reading | None = None
    check: Reading | None = None
    runs: tuple[str, ...] = ()


@dataclass(frozen=True)
class FlipPoint(Figure):
    """A δ where the verdict changes, and what it reads there."""

    delta: float | None = None
    verdict: str | None = None


@dataclass(frozen=True)
class Flip(Figure):
    """The verdict at the rule's ``delta`` and the nearest δ below and above where it
    changes (None: not within 0 to 50 pp)."""

    delta: float | None = None
    verdict: str | None = None
    below: FlipPoint | None = None
    above: FlipPoint | None = None


@dataclass(frozen=True)
class GateVerdict(Figure):
    """The verdict with the no-deficit gate on another ``gap`` (None, with
    ``not_estimable``, where that gap is not estimable)."""

    verdict: str | None = None
    not_estimable: str | None = field(default=None, metadata=OMITTED)
    gap: Reading | None = None


@dataclass(frozen=True)
class PreviousRule(Figure):
    """The verdict under the first rules' reading (the 95% interval), and why it moved."""

    verdict: str | None = None
    level: float | None = None
    note: str | None = None


@dataclass(frozen=True)
class Sensitivity(Figure):
    """How a verdict moves with δ (``flip``), with the gate on the all-token and the
    length-standardised gap, per k, and under the first rules' 95% reading
    (docs/analysis.md); only ``not_computed`` (why) where there is no verdict to test."""

    flip: Flip | None = None
    all_tokens: GateVerdict | None = None
    length_standardised: GateVerdict | None = None
    per_k: dict[str, PerK] = field(default_factory=dict)
    previous_rule: PreviousRule | None = None
    not_computed: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.not_computed is not None:
            return {"not_computed": self.not_computed}
        return {k: v for k, v in super().to_json().items() if k != "not_computed"}

    def _flip(self, side: str) -> tuple[float, str] | None:
        point = getattr(self.flip, side) if self.flip is not None else None
        if point is None or point.delta is None or point.verdict is None:
            return None
        return point.delta, point.verdict

    @property
    def flip_below(self) -> tuple[float, str] | None:
        """(δ, verdict) of the nearest change below the rule's δ."""
        return self._flip("below")

    @property
    def flip_above(self) -> tuple[float, str] | None:
        """(δ, verdict) of the nearest change above the rule's δ."""
        return self._flip("above")

    @property
    def previous(self) -> str | None:
        return self.previous_rule.verdict if self.previous_rule is not None else None


@dataclass(frozen=True)
class Bounded(Figure):
    """H2's effect where its control does not hold: the trained drafters'
    within-confidence gap shifted by ∓``bound`` (``low``, ``high``), the union's interval
    (``interval``), how the rule read it and the assumption it rests on
    (docs/analysis.md, "H2 without its control")."""

    bound: float | None = None
    low: Estimate | None = None
    high: Estimate | None = None
    interval: Estimate | None = None
    reading: str | None = None
    assumption: str | None = None


@dataclass(frozen=True)
class Hypothesis(Section):
    """H1 or H2: the verdict, the effect it reads with its interval, and why. A
    hypothesis read by its rule has ``estimand`` and the keys after it (``check``
    written even when None); an early verdict (no data, no logprobs) has ``evidence``
    and at most ``reading``. ``refused``: the unvouched replays that made it inconclusive."""

    verdict: str | None = None
    effect: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    decision_low: float | None = field(default=None, metadata=OMITTED)
    decision_high: float | None = field(default=None, metadata=OMITTED)
    not_estimable: str | None = field(default=None, metadata=OMITTED)
    evidence: str | None = None
    family: str | None = field(default=None, metadata=OMITTED)
    estimand: str | None = field(default=None, metadata=OMITTED)
    reading: str | None = field(default=None, metadata=OMITTED)
    check: Check | None = field(default=None, metadata=OMITTED)
    power: Power | None = field(default=None, metadata=OMITTED)
    control: Control | None = field(default=None, metadata=OMITTED)  # H2's control
    bounded: Bounded | None = field(default=None, metadata=OMITTED)  # H2 without it
    caveat: str | None = field(default=None, metadata=OMITTED)
    scope: str | None = field(default=None, metadata=OMITTED)  # the rows and runs it read
    statement: str | None = field(default=None, metadata=OMITTED)  # worded against δ
    refused: tuple[str, ...] | None = field(default=None, metadata=OMITTED)
    sensitivity: Sensitivity | None = field(default=None, metadata=OMITTED)

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        if self.estimand is not None and self.check is None:  # read by its rule: key kept
            keys = list(out)
            at = keys.index("reading") + 1 if "reading" in keys else len(keys)
            out = dict([*list(out.items())[:at], ("check", None), *list(out.items())[at:]])
        return out

    @property
    def effect_estimate(self) -> Estimate:
        """The effect as an :class:`Estimate` (for :func:`tokenlens.format.interval`)."""
        return Estimate(self.effect, self.ci_low, self.ci_high, None, self.not_estimable)
