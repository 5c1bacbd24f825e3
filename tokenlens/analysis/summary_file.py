"""``summary.json`` as typed objects: read once, then attributes instead of dict chains.

``tokenlens analyze`` writes summary.json (docs/analysis.md, "summary.json"); the
tables, FINDINGS.md, the HTML report and the index page read it. They read it through
:func:`load_summary` / :func:`parse_summary`, which turn the JSON into the frozen
dataclasses below, so that a missing section is ``None`` (or an empty dict or list)
with a name, in one place, rather than ``.get(...) or {}`` at every use.

Older files stay readable: every key that a newer version added is optional, a
missing or ill-typed value becomes ``None``, and nothing is recomputed. Values are
kept as they were read (an ``int`` stays an ``int``), so that a view prints what the
file holds. The whole dict stays available as :attr:`Summary.raw` for the parts no
typed view needs yet (the charts walk the breakdowns generically).

Only the standard library: :mod:`tokenlens.format` reads these objects by attribute
as it reads dicts by key (:func:`tokenlens.format.stat_get`).
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenlens.errors import TokenlensError
from tokenlens.format_version import ANALYSIS, check_readable

SUMMARY = "summary.json"

# --- scalar readers: a wrong type reads as missing ------------------------------------------


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _float(value: Any) -> float | None:
    """A number as it was read (int or float, NaN kept: the views print it as missing)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    number: float = value
    return number


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    number: int = value
    return number


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _bool(value: Any) -> bool | None:
    # numpy's bool_ too: the analysis hands its in-memory dict to the same reader
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    return None


# --- figures --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A figure with its interval (a gap, a part of the split, tokens per step).
    ``value`` is None with a ``not_estimable`` reason when the data cannot support it;
    ``no_interval`` says why a value has no interval; ``p_adjusted`` is the Holm p of an
    exploratory comparison."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    not_estimable: str | None = None
    no_interval: str | None = None
    p_adjusted: float | None = None

    @classmethod
    def parse(cls, data: Any) -> Estimate | None:
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            value=_float(data.get("value")),
            ci_low=_float(data.get("ci_low")),
            ci_high=_float(data.get("ci_high")),
            n=_int(data.get("n")),
            not_estimable=_str(data.get("not_estimable")),
            no_interval=_str(data.get("no_interval")),
            p_adjusted=_float(data.get("p_adjusted")),
        )


@dataclass(frozen=True)
class Rate:
    """An acceptance rate with its interval: ``accepted`` of ``n`` rows from
    ``requests`` prompts; ``sparse`` when fewer rows than min_count."""

    rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    accepted: int | None = None
    requests: int | None = None
    sparse: bool | None = None
    not_estimable: str | None = None

    @classmethod
    def parse(cls, data: Any) -> Rate | None:
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            rate=_float(data.get("rate")),
            ci_low=_float(data.get("ci_low")),
            ci_high=_float(data.get("ci_high")),
            n=_int(data.get("n")),
            accepted=_int(data.get("accepted")),
            requests=_int(data.get("requests")),
            sparse=_bool(data.get("sparse")),
            not_estimable=_str(data.get("not_estimable")),
        )


def _rates(data: Any) -> dict[str, Rate]:
    """``{lang: Rate}`` (or ``{group: Rate}``), entries that are not rates left out."""
    out = {}
    for key, value in _map(data).items():
        rate = Rate.parse(value)
        if rate is not None:
            out[str(key)] = rate
    return out


def _estimates(data: Any) -> dict[str, Estimate]:
    out = {}
    for key, value in _map(data).items():
        est = Estimate.parse(value)
        if est is not None:
            out[str(key)] = est
    return out


# --- sections -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """The analysis' options as recorded (``delta`` is the verdict threshold, the CLI's
    ``--threshold``)."""

    seed: int | None = None
    bootstrap: int | None = None
    level: float | None = None
    interval: str | None = None
    cluster: str | None = None
    min_count: int | None = None
    delta: float | None = None
    min_prompts: int | None = None
    alpha: float | None = None  # None: written before decision intervals (read at 95%)
    decision_level: float | None = None
    rules_hash: str | None = None  # the frozen rule set (also in the signature as rules:)

    @classmethod
    def parse(cls, data: Any) -> Settings:
        d = _map(data)
        return cls(
            seed=_int(d.get("seed")),
            bootstrap=_int(d.get("bootstrap")),
            level=_float(d.get("level")),
            interval=_str(d.get("interval")),
            cluster=_str(d.get("cluster")),
            min_count=_int(d.get("min_count")),
            delta=_float(d.get("delta")),
            min_prompts=_int(d.get("min_prompts")),
            alpha=_float(d.get("alpha")),
            decision_level=_float(d.get("decision_level")),
            rules_hash=_str(d.get("rules_hash")),
        )


@dataclass(frozen=True)
class Support:
    """Share of each language's judged rows in the classes both languages fill."""

    share_ja: float | None = None
    share_en: float | None = None

    @classmethod
    def parse(cls, data: Any) -> Support | None:
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(share_ja=_float(data.get("share_ja")), share_en=_float(data.get("share_en")))


@dataclass(frozen=True)
class Split:
    """gap = composition + within + out_of_support, by one column; the whole split is
    ``not_estimable`` (why) when too little of the data lies in shared classes."""

    column: str | None = None
    gap: Estimate | None = None
    composition: Estimate | None = None
    within: Estimate | None = None
    out_of_support: Estimate | None = None
    support: Support | None = None
    not_estimable: str | None = None

    PARTS = ("composition", "within", "out_of_support")

    @classmethod
    def parse(cls, data: Any) -> Split | None:
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            column=_str(data.get("column")),
            gap=Estimate.parse(data.get("gap")),
            composition=Estimate.parse(data.get("composition")),
            within=Estimate.parse(data.get("within")),
            out_of_support=Estimate.parse(data.get("out_of_support")),
            support=Support.parse(data.get("support")),
            not_estimable=_str(data.get("not_estimable")),
        )

    def part(self, name: str) -> Estimate | None:
        """``gap``, ``composition``, ``within`` or ``out_of_support`` by name."""
        value = getattr(self, name)
        return value if isinstance(value, Estimate) else None


def _configs(data: Any) -> tuple[tuple[str, int], ...]:
    """``[[method, k], ...]`` as pairs (entries of another shape left out)."""
    out = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, list) and len(item) == 2 and _int(item[1]) is not None:
            out.append((str(item[0]), int(item[1])))
    return tuple(out)


def _strs(data: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in data) if isinstance(data, list) else ()


@dataclass(frozen=True)
class Family:
    """One drafter family (``trained`` or ``training_free``) pooled over its runs
    (``configurations``: the (method, k) of each)."""

    name: str
    gap_judged: Estimate | None = None
    gap_all: Estimate | None = None
    confidence: Split | None = None
    runs: tuple[str, ...] = ()
    configurations: tuple[tuple[str, int], ...] = ()
    acceptance: dict[str, Rate] = field(default_factory=dict)
    acceptance_judged: dict[str, Rate] = field(default_factory=dict)

    @classmethod
    def parse(cls, name: str, data: Any) -> Family:
        d = _map(data)
        return cls(
            name=name,
            gap_judged=Estimate.parse(d.get("gap_judged")),
            gap_all=Estimate.parse(d.get("gap_all")),
            confidence=Split.parse(d.get("confidence")),
            runs=_strs(d.get("runs")),
            configurations=_configs(d.get("configurations")),
            acceptance=_rates(d.get("acceptance")),
            acceptance_judged=_rates(d.get("acceptance_judged")),
        )

    @property
    def ks(self) -> tuple[int, ...]:
        return tuple(sorted({k for _, k in self.configurations}))


@dataclass(frozen=True)
class Comparison:
    """One exploratory class comparison (Japanese − English within a class)."""

    family: str | None = None
    by: str | None = None
    cls: str | None = None  # the class ("class" in the file)
    rows_ja: int | None = None
    rows_en: int | None = None
    rate_ja: float | None = None
    rate_en: float | None = None
    difference: Estimate | None = None

    @classmethod
    def parse(cls, data: Any) -> Comparison:
        d = _map(data)
        return cls(
            family=_str(d.get("family")),
            by=_str(d.get("by")),
            cls=_str(d.get("class")),
            rows_ja=_int(d.get("rows_ja")),
            rows_en=_int(d.get("rows_en")),
            rate_ja=_float(d.get("rate_ja")),
            rate_en=_float(d.get("rate_en")),
            difference=Estimate.parse(d.get("difference")),
        )


@dataclass(frozen=True)
class Explore:
    comparisons: int | None = None
    level: float | None = None
    classes: tuple[Comparison, ...] = ()

    @classmethod
    def parse(cls, data: Any) -> Explore | None:
        if not isinstance(data, Mapping) or not data:
            return None
        classes = data.get("classes")
        return cls(
            comparisons=_int(data.get("comparisons")),
            level=_float(data.get("level")),
            classes=tuple(Comparison.parse(c) for c in classes)
            if isinstance(classes, list)
            else (),
        )


@dataclass(frozen=True)
class Gap:
    """The Japanese − English gap of one family (``family``) and its descriptive
    splits by token class."""

    family: str | None = None
    overall: Estimate | None = None
    judged: Estimate | None = None
    relative_judged: Estimate | None = None
    decomposition: dict[str, Split] = field(default_factory=dict)
    explore: Explore | None = None

    @classmethod
    def parse(cls, data: Any) -> Gap | None:
        if not isinstance(data, Mapping) or not data:
            return None
        splits = {}
        for column, value in _map(data.get("decomposition")).items():
            split = Split.parse(value)
            if split is not None:
                splits[str(column)] = split
        return cls(
            family=_str(data.get("family")),
            overall=Estimate.parse(data.get("overall")),
            judged=Estimate.parse(data.get("judged")),
            relative_judged=Estimate.parse(data.get("relative_judged")),
            decomposition=splits,
            explore=Explore.parse(data.get("explore")),
        )


@dataclass(frozen=True)
class Contrast:
    """H2's contrast: the within-confidence gap, trained minus training-free."""

    difference: Estimate | None = None
    within_trained: Estimate | None = None
    within_training_free: Estimate | None = None

    @classmethod
    def parse(cls, data: Any) -> Contrast | None:
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            difference=Estimate.parse(data.get("difference")),
            within_trained=Estimate.parse(data.get("within_trained")),
            within_training_free=Estimate.parse(data.get("within_training_free")),
        )


@dataclass(frozen=True)
class Check:
    """The second interval a verdict reads, and how the rule read it."""

    name: str | None = None
    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    not_estimable: str | None = None
    reading: str | None = None
    decision_low: float | None = None
    decision_high: float | None = None

    @classmethod
    def parse(cls, data: Any) -> Check | None:
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            name=_str(data.get("name")),
            value=_float(data.get("value")),
            ci_low=_float(data.get("ci_low")),
            ci_high=_float(data.get("ci_high")),
            n=_int(data.get("n")),
            not_estimable=_str(data.get("not_estimable")),
            reading=_str(data.get("reading")),
            decision_low=_float(data.get("decision_low")),
            decision_high=_float(data.get("decision_high")),
        )


@dataclass(frozen=True)
class Power:
    """The minimum detectable effect and the prompts per language an effect of each
    size (the key, as written: ``"0.05"``) needs; ``rule`` says what it models (H2:
    the whole conjunction), ``power_at`` the power at each size now."""

    mde: float | None = None
    prompts_needed: dict[str, int | None] = field(default_factory=dict)
    rule: str | None = None
    power_at: dict[str, float | None] = field(default_factory=dict)
    mde_effect_alone: float | None = None

    @classmethod
    def parse(cls, data: Any) -> Power | None:
        if not isinstance(data, Mapping) or not data:
            return None
        needed = {str(k): _int(v) for k, v in _map(data.get("prompts_needed")).items()}
        return cls(
            mde=_float(data.get("mde")),
            prompts_needed=needed,
            rule=_str(data.get("rule")),
            power_at={str(k): _float(v) for k, v in _map(data.get("power_at")).items()},
            mde_effect_alone=_float(data.get("mde_effect_alone")),
        )


@dataclass(frozen=True)
class Reading:
    """One figure of a sensitivity entry: its value and the interval the rule read."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    decision_low: float | None = None
    decision_high: float | None = None
    not_estimable: str | None = None

    @classmethod
    def parse(cls, data: Any) -> Reading | None:
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            value=_float(data.get("value")),
            ci_low=_float(data.get("ci_low")),
            ci_high=_float(data.get("ci_high")),
            decision_low=_float(data.get("decision_low")),
            decision_high=_float(data.get("decision_high")),
            not_estimable=_str(data.get("not_estimable")),
        )


@dataclass(frozen=True)
class PerK:
    """A verdict of one k's runs alone, judged and on vLLM's all-token rate."""

    runs: tuple[str, ...] = ()
    verdict: str | None = None
    verdict_all_tokens: str | None = None
    gap: Reading | None = None
    gap_all: Reading | None = None

    @classmethod
    def parse(cls, data: Any) -> PerK:
        d = _map(data)
        return cls(
            runs=_strs(d.get("runs")),
            verdict=_str(d.get("verdict")),
            verdict_all_tokens=_str(d.get("verdict_all_tokens")),
            gap=Reading.parse(d.get("gap")),
            gap_all=Reading.parse(d.get("gap_all")),
        )


@dataclass(frozen=True)
class Sensitivity:
    """How a verdict moves with δ, with the all-token gap, per k, and under the first
    rules' 95% reading (docs/analysis.md). ``flip_below``/``flip_above``: (δ, verdict)
    where it changes nearest to the rule's δ."""

    raw: Mapping[str, Any] = field(default_factory=dict)
    delta: float | None = None
    flip_below: tuple[float, str] | None = None
    flip_above: tuple[float, str] | None = None
    all_tokens: str | None = None
    all_tokens_gap: Reading | None = None
    per_k: dict[str, PerK] = field(default_factory=dict)
    previous: str | None = None
    previous_level: float | None = None
    previous_note: str | None = None
    not_computed: str | None = None

    @classmethod
    def parse(cls, data: Any) -> Sensitivity | None:
        if not isinstance(data, Mapping) or not data:
            return None
        flip = _map(data.get("flip"))

        def point(side: str) -> tuple[float, str] | None:
            at = _map(flip.get(side))
            d, v = _float(at.get("delta")), _str(at.get("verdict"))
            return (d, v) if d is not None and v is not None else None

        all_tokens = _map(data.get("all_tokens"))
        previous = _map(data.get("previous_rule"))
        return cls(
            raw=data,
            delta=_float(flip.get("delta")),
            flip_below=point("below"),
            flip_above=point("above"),
            all_tokens=_str(all_tokens.get("verdict")),
            all_tokens_gap=Reading.parse(all_tokens.get("gap")),
            per_k={str(k): PerK.parse(v) for k, v in _map(data.get("per_k")).items()},
            previous=_str(previous.get("verdict")),
            previous_level=_float(previous.get("level")),
            previous_note=_str(previous.get("note")),
            not_computed=_str(data.get("not_computed")),
        )


@dataclass(frozen=True)
class Hypothesis:
    """H1 or H2: the verdict, the effect it reads with its interval, and why."""

    verdict: str | None = None
    effect: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    not_estimable: str | None = None
    evidence: str | None = None
    family: str | None = None
    estimand: str | None = None
    reading: str | None = None
    check: Check | None = None
    power: Power | None = None
    caveat: str | None = None
    decision_low: float | None = None
    decision_high: float | None = None
    statement: str | None = None  # the verdict worded against its margin
    scope: str | None = None  # the rows and runs it read
    sensitivity: Sensitivity | None = None

    @classmethod
    def parse(cls, data: Any) -> Hypothesis:
        d = _map(data)
        return cls(
            verdict=_str(d.get("verdict")),
            effect=_float(d.get("effect")),
            ci_low=_float(d.get("ci_low")),
            ci_high=_float(d.get("ci_high")),
            not_estimable=_str(d.get("not_estimable")),
            evidence=_str(d.get("evidence")),
            family=_str(d.get("family")),
            estimand=_str(d.get("estimand")),
            reading=_str(d.get("reading")),
            check=Check.parse(d.get("check")),
            power=Power.parse(d.get("power")),
            caveat=_str(d.get("caveat")),
            decision_low=_float(d.get("decision_low")),
            decision_high=_float(d.get("decision_high")),
            statement=_str(d.get("statement")),
            scope=_str(d.get("scope")),
            sensitivity=Sensitivity.parse(d.get("sensitivity")),
        )

    @property
    def effect_estimate(self) -> Estimate:
        """The effect as an :class:`Estimate` (for :func:`tokenlens.format.interval`)."""
        return Estimate(self.effect, self.ci_low, self.ci_high, None, self.not_estimable)


@dataclass(frozen=True)
class SpeedModel:
    """The speed model of one run in one language (docs/analysis.md, "Speed model")."""

    traced_k: int | None = None
    measured_tokens_per_step: float | None = None
    predicted_tokens_per_step: float | None = None
    iid_tokens_per_step: float | None = None
    draft_cost: float | None = None
    recommended_k: int | None = None
    recommended_speedup: float | None = None

    @classmethod
    def parse(cls, data: Any) -> SpeedModel:
        d = _map(data)
        return cls(
            traced_k=_int(d.get("traced_k")),
            measured_tokens_per_step=_float(d.get("measured_tokens_per_step")),
            predicted_tokens_per_step=_float(d.get("predicted_tokens_per_step")),
            iid_tokens_per_step=_float(d.get("iid_tokens_per_step")),
            draft_cost=_float(d.get("draft_cost")),
            recommended_k=_int(d.get("recommended_k")),
            recommended_speedup=_float(d.get("recommended_speedup")),
        )


@dataclass(frozen=True)
class RunSummary:
    """One analysed run. ``k`` is the draft tokens per step (the manifest's
    ``num_speculative_tokens``); ``reconciled`` whether its events equal vLLM's counters
    (None when the file does not say)."""

    label: str | None = None
    path: str | None = None
    method: str | None = None
    k: int | None = None
    signature: str | None = None
    status: str | None = None
    replayed: bool = False
    reconciled: bool | None = None
    acceptance: dict[str, Rate] = field(default_factory=dict)
    gap: Estimate | None = None
    draft_cost_source: str | None = None
    speed: dict[str, SpeedModel] = field(default_factory=dict)  # by language
    acceptance_judged: dict[str, Rate] = field(default_factory=dict)
    # {lang: {position: Rate}}: over the steps that proposed a draft at p
    by_position: dict[str, dict[str, Rate]] = field(default_factory=dict)
    by_position_conditional: dict[str, dict[str, Rate]] = field(default_factory=dict)
    # {lang: {position: accepted at p / all drafts}} (vLLM's counter over num_drafts)
    per_draft: dict[str, dict[str, float | None]] = field(default_factory=dict)
    text_per_step: dict[str, dict[str, Estimate]] = field(default_factory=dict)
    dtype: str | None = None
    replay_source: str | None = None
    replayed_from: str | None = None
    models: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def parse(cls, data: Any) -> RunSummary:
        d = _map(data)
        speed = _map(d.get("speed"))
        positions = {str(lang): _rates(v) for lang, v in _map(d.get("by_position")).items()}
        per_draft = {
            str(lang): {str(p): _float(_map(e).get("per_draft")) for p, e in _map(v).items()}
            for lang, v in _map(d.get("by_position")).items()
        }
        models = d.get("models")
        return cls(
            label=_str(d.get("label")),
            path=_str(d.get("path")),
            method=_str(d.get("method")),
            k=_int(d.get("k")),
            signature=_str(d.get("signature")),
            status=_str(d.get("status")),
            replayed=bool(d.get("replayed")),
            reconciled=_bool(_map(d.get("reconciliation")).get("matches")),
            acceptance=_rates(d.get("acceptance")),
            gap=Estimate.parse(d.get("gap")),
            draft_cost_source=_str(speed.get("draft_cost_source")),
            speed={str(k): SpeedModel.parse(v) for k, v in _map(speed.get("by_lang")).items()},
            acceptance_judged=_rates(d.get("acceptance_judged")),
            by_position=positions,
            by_position_conditional={
                str(lang): _rates(v) for lang, v in _map(d.get("by_position_conditional")).items()
            },
            per_draft=per_draft,
            text_per_step={
                str(lang): _estimates(v) for lang, v in _map(d.get("text_per_step")).items()
            },
            dtype=_str(d.get("dtype")),
            replay_source=_str(d.get("replay_source")),
            replayed_from=_str(d.get("replayed_from")),
            models=tuple(m for m in models if isinstance(m, Mapping))
            if isinstance(models, list)
            else (),
        )


@dataclass(frozen=True)
class Scope:
    """What the per-language sections at the top of summary.json cover: one drafter
    family (``family``), its runs and their (method, k); ``note`` says what is pooled."""

    family: str | None = None
    runs: tuple[str, ...] = ()
    configurations: tuple[tuple[str, int], ...] = ()
    left_out: tuple[str, ...] = ()
    note: str | None = None

    @classmethod
    def parse(cls, data: Any) -> Scope | None:
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            family=_str(data.get("family")),
            runs=_strs(data.get("runs")),
            configurations=_configs(data.get("configurations")),
            left_out=_strs(data.get("left_out")),
            note=_str(data.get("note")),
        )


@dataclass(frozen=True)
class Difference:
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

    @classmethod
    def parse(cls, data: Any) -> Difference | None:
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            value=_float(data.get("value")),
            ci_low=_float(data.get("ci_low")),
            ci_high=_float(data.get("ci_high")),
            n=_int(data.get("n")),
            p=_float(data.get("p")),
            p_holm=_float(data.get("p_holm")),
            adjusted_low=_float(data.get("adjusted_low")),
            adjusted_high=_float(data.get("adjusted_high")),
        )


@dataclass(frozen=True)
class ClassEntry:
    """One class of a declared breakdown: ``status`` is ``compared``, ``only_ja``,
    ``only_en`` (one language fills it: not compared) or ``sparse``."""

    cls: str | None = None
    status: str | None = None
    rows_ja: int | None = None
    rows_en: int | None = None
    prompts_ja: int | None = None
    prompts_en: int | None = None
    rate_ja: Rate | None = None
    rate_en: Rate | None = None
    difference: Difference | None = None

    @classmethod
    def parse(cls, data: Any) -> ClassEntry:
        d = _map(data)
        return cls(
            cls=_str(d.get("class")),
            status=_str(d.get("status")),
            rows_ja=_int(d.get("rows_ja")),
            rows_en=_int(d.get("rows_en")),
            prompts_ja=_int(d.get("prompts_ja")),
            prompts_en=_int(d.get("prompts_en")),
            rate_ja=Rate.parse(d.get("rate_ja")),
            rate_en=Rate.parse(d.get("rate_en")),
            difference=Difference.parse(d.get("difference")),
        )


@dataclass(frozen=True)
class ClassTable:
    """One family of comparisons: a drafter family x a breakdown."""

    column: str | None = None
    comparisons: int | None = None
    adjusted_level: float | None = None
    classes: tuple[ClassEntry, ...] = ()

    @classmethod
    def parse(cls, data: Any) -> ClassTable:
        d = _map(data)
        classes = d.get("classes")
        return cls(
            column=_str(d.get("column")),
            comparisons=_int(d.get("comparisons")),
            adjusted_level=_float(d.get("adjusted_level")),
            classes=tuple(ClassEntry.parse(c) for c in classes)
            if isinstance(classes, list)
            else (),
        )


@dataclass(frozen=True)
class ClassFamily:
    runs: tuple[str, ...] = ()
    ks: tuple[int, ...] = ()
    by: dict[str, ClassTable] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: Any) -> ClassFamily:
        d = _map(data)
        ks = d.get("ks")
        return cls(
            runs=_strs(d.get("runs")),
            ks=tuple(int(k) for k in ks if _int(k) is not None) if isinstance(ks, list) else (),
            by={str(k): ClassTable.parse(v) for k, v in _map(d.get("by")).items()},
        )


@dataclass(frozen=True)
class Classes:
    """The declared class breakdowns as JA − EN differences, per drafter family."""

    adjustment: str | None = None
    level: float | None = None
    family_of_comparisons: str | None = None
    families: dict[str, ClassFamily] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: Any) -> Classes | None:
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            adjustment=_str(data.get("adjustment")),
            level=_float(data.get("level")),
            family_of_comparisons=_str(data.get("family_of_comparisons")),
            families={str(k): ClassFamily.parse(v) for k, v in _map(data.get("families")).items()},
        )


@dataclass(frozen=True)
class Share:
    """A share of rejections (``count`` of ``n``) with its interval."""

    share: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    count: int | None = None

    @classmethod
    def parse(cls, data: Any) -> Share | None:
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            share=_float(data.get("share")),
            ci_low=_float(data.get("ci_low")),
            ci_high=_float(data.get("ci_high")),
            n=_int(data.get("n")),
            count=_int(data.get("count")),
        )


REJECTION_SHARES = ("split", "text", "draft_partial", "emitted_partial")


@dataclass(frozen=True)
class RejectionFamily:
    """Rejections of one drafter family: counts per language, the share of each kind and
    flag per language, and the JA − EN difference of the split share."""

    runs: tuple[str, ...] = ()
    rejections: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)
    shares: dict[str, dict[str, Share]] = field(default_factory=dict)  # {kind: {lang: Share}}
    split_gap: Estimate | None = None

    @classmethod
    def parse(cls, data: Any) -> RejectionFamily:
        d = _map(data)
        shares = {}
        for kind in REJECTION_SHARES:
            block = {}
            for lang, v in _map(d.get(kind)).items():
                share = Share.parse(v)
                if share is not None:
                    block[str(lang)] = share
            shares[kind] = block
        counts = {str(k): v for k, v in _map(d.get("rejections")).items() if _int(v) is not None}
        unknown = {str(k): v for k, v in _map(d.get("unknown")).items() if _int(v) is not None}
        return cls(
            runs=_strs(d.get("runs")),
            rejections=counts,
            unknown=unknown,
            shares=shares,
            split_gap=Estimate.parse(d.get("split_gap")),
        )


@dataclass(frozen=True)
class DomainGap:
    """The judged gap of one domain: 95% interval, the decision and the
    Bonferroni-adjusted decision interval, and the reading against −δ on the latter."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    pairs: int | None = None
    rate_ja: float | None = None
    rate_en: float | None = None
    adjusted_low: float | None = None
    adjusted_high: float | None = None
    reading: str | None = None
    not_estimable: str | None = None

    @classmethod
    def parse(cls, data: Any) -> DomainGap:
        d = _map(data)
        return cls(
            value=_float(d.get("value")),
            ci_low=_float(d.get("ci_low")),
            ci_high=_float(d.get("ci_high")),
            n=_int(d.get("n")),
            pairs=_int(d.get("pairs")),
            rate_ja=_float(d.get("rate_ja")),
            rate_en=_float(d.get("rate_en")),
            adjusted_low=_float(d.get("adjusted_low")),
            adjusted_high=_float(d.get("adjusted_high")),
            reading=_str(d.get("reading")),
            not_estimable=_str(d.get("not_estimable") or d.get("no_interval")),
        )


@dataclass(frozen=True)
class Heterogeneity:
    test: str | None = None
    statistic: str | None = None
    why: str | None = None
    p: float | None = None
    spread: float | None = None
    chance_spread: float | None = None
    permutations: int | None = None
    domains: int | None = None
    pairs: int | None = None
    not_estimable: str | None = None

    @classmethod
    def parse(cls, data: Any) -> Heterogeneity | None:
        if not isinstance(data, Mapping) or not data:
            return None
        return cls(
            test=_str(data.get("test")),
            statistic=_str(data.get("statistic")),
            why=_str(data.get("why")),
            p=_float(data.get("p")),
            spread=_float(data.get("spread")),
            chance_spread=_float(data.get("chance_spread")),
            permutations=_int(data.get("permutations")),
            domains=_int(data.get("domains")),
            pairs=_int(data.get("pairs")),
            not_estimable=_str(data.get("not_estimable")),
        )


@dataclass(frozen=True)
class DomainFamily:
    adjusted_level: float | None = None
    domains: dict[str, DomainGap] = field(default_factory=dict)
    pooled: Estimate | None = None
    pooled_reading: str | None = None
    departures: tuple[str, ...] = ()  # domain names
    concerns: tuple[str, ...] = ()
    heterogeneity: Heterogeneity | None = None

    @classmethod
    def parse(cls, data: Any) -> DomainFamily:
        d = _map(data)

        def names(key: str) -> tuple[str, ...]:
            items = d.get(key)
            if not isinstance(items, list):
                return ()
            return tuple(str(_map(x).get("domain")) for x in items if _map(x).get("domain"))

        return cls(
            adjusted_level=_float(d.get("adjusted_level")),
            domains={str(k): DomainGap.parse(v) for k, v in _map(d.get("domains")).items()},
            pooled=Estimate.parse(d.get("pooled")),
            pooled_reading=_str(d.get("pooled_reading")),
            departures=names("departures"),
            concerns=names("concerns"),
            heterogeneity=Heterogeneity.parse(d.get("heterogeneity")),
        )


@dataclass(frozen=True)
class Summary:
    """The whole of summary.json. Sections a file lacks are empty (or None)."""

    raw: Mapping[str, Any]
    signature: str | None = None
    tokenlens_version: str | None = None
    settings: Settings = field(default_factory=Settings)
    prompts: dict[str, int] = field(default_factory=dict)  # prompts per language
    acceptance: dict[str, Rate] = field(default_factory=dict)  # all draft tokens
    acceptance_judged: dict[str, Rate] = field(default_factory=dict)
    # by_script, by_position, ...: {section: {lang: {group: Rate}}}
    breakdowns: dict[str, dict[str, dict[str, Rate]]] = field(default_factory=dict)
    text_per_step: dict[str, dict[str, Estimate]] = field(default_factory=dict)
    families: dict[str, Family] = field(default_factory=dict)
    h2_contrast: Contrast | None = None
    gap: Gap | None = None
    hypotheses: dict[str, Hypothesis] = field(default_factory=dict)
    runs: tuple[RunSummary, ...] = ()
    warnings: tuple[str, ...] = ()  # inputs.warnings: runs let through by an --allow flag
    scope: Scope | None = None  # what the per-language sections at the top cover
    classes: Classes | None = None
    rejections: dict[str, RejectionFamily] = field(default_factory=dict)
    domains: dict[str, DomainFamily] = field(default_factory=dict)
    domain_source: str | None = None

    def breakdown(self, key: str) -> dict[str, dict[str, Rate]]:
        """``by_<key>`` (``script``, ``position``, ...) or ``by_*`` by its full name;
        empty when the file has no such section."""
        return self.breakdowns.get(key if key.startswith("by_") else f"by_{key}", {})

    @property
    def verdicts(self) -> dict[str, str | None]:
        return {key: h.verdict for key, h in self.hypotheses.items()}


def parse_summary(data: Mapping[str, Any] | Summary) -> Summary:
    """A :class:`Summary` from the parsed JSON of summary.json (or the dict the
    analysis is about to write); a Summary is returned as it is."""
    if isinstance(data, Summary):
        return data
    if not isinstance(data, Mapping):
        raise TokenlensError("summary.json is not an analysis summary (not a JSON object)")
    check_readable(data, ANALYSIS, "summary.json")
    breakdowns = {}
    for key, block in data.items():
        if isinstance(key, str) and key.startswith("by_") and isinstance(block, Mapping):
            breakdowns[key] = {str(lang): _rates(groups) for lang, groups in block.items()}
    prompts = {str(k): v for k, v in _map(data.get("prompts")).items() if _int(v) is not None}
    runs = data.get("runs")
    warnings = _map(data.get("inputs")).get("warnings")
    rejections = _map(_map(data.get("rejections")).get("families"))
    domains = _map(data.get("domains"))
    return Summary(
        raw=data,
        signature=_str(data.get("signature")),
        tokenlens_version=_str(data.get("tokenlens_version")),
        settings=Settings.parse(data.get("settings")),
        prompts=prompts,
        acceptance=_rates(data.get("acceptance")),
        acceptance_judged=_rates(data.get("acceptance_judged")),
        breakdowns=breakdowns,
        text_per_step={
            str(lang): _estimates(v) for lang, v in _map(data.get("text_per_step")).items()
        },
        families={str(k): Family.parse(str(k), v) for k, v in _map(data.get("families")).items()},
        h2_contrast=Contrast.parse(data.get("h2_contrast")),
        gap=Gap.parse(data.get("gap")),
        hypotheses={str(k): Hypothesis.parse(v) for k, v in _map(data.get("hypotheses")).items()},
        runs=tuple(RunSummary.parse(r) for r in runs) if isinstance(runs, list) else (),
        warnings=tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
        scope=Scope.parse(data.get("scope")),
        classes=Classes.parse(data.get("classes")),
        rejections={str(k): RejectionFamily.parse(v) for k, v in rejections.items()},
        domains={str(k): DomainFamily.parse(v) for k, v in _map(domains.get("families")).items()},
        domain_source=_str(domains.get("source")),
    )


def load_summary(path: Path) -> Summary:
    """Read and parse ``path`` (a summary.json, or the analysis directory holding one)."""
    if path.is_dir():
        path = path / SUMMARY
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError as exc:
        raise TokenlensError(f"{path}: not found (run tokenlens analyze first)") from exc
    except (OSError, ValueError) as exc:
        raise TokenlensError(f"{path}: not valid JSON ({exc})") from exc
    return parse_summary(data)
