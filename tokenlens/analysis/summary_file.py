"""summary.json's schema: its sections as frozen records, and the one reader of the file.

:func:`load_summary` / :func:`parse_summary` take the file (or its parsed JSON) and
return a :class:`Summary`: every section a record (these, those of
:mod:`~tokenlens.analysis.summary_sections`, the figures of
:mod:`~tokenlens.analysis.summary_figures`), a section the file lacks empty or None.
The analysis builds the same records and writes them with their ``to_json``
(:func:`~tokenlens.analysis.summary_fields.json_value`), so a key is declared once.

Guarantees: older files read (a key a newer version added is optional; a missing or
ill-typed value reads as None; nothing is recomputed); a field is read from the key of
its name by its annotation's reader, and only fields kept elsewhere in the file are read
by hand. Only the standard library, so that :mod:`tokenlens.format` can print these.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenlens.analysis.summary_fields import (
    Figure,
    Section,
    as_bool,
    as_float,
    as_map,
    as_str,
    as_strs,
    read,
    renamed,
)
from tokenlens.analysis.summary_figures import (
    Bounded,
    Check,
    Classes,
    Contrast,
    Control,
    Estimate,
    LengthStandardised,
    PositionRate,
    Power,
    Rate,
    Reading,
    Split,
    position_rates,
    rates,
)
from tokenlens.analysis.summary_sections import (
    ByteLength,
    DomainFamily,
    MarginInSpeed,
    RejectionFamily,
    RejectionRun,
)
from tokenlens.errors import TokenlensError
from tokenlens.format_version import ANALYSIS, check_readable

SUMMARY = "summary.json"


@dataclass(frozen=True)
class SupportRules(Figure):
    """The thresholds of common support the analysis ran with (``settings.support``)."""

    min_rows: int | None = None
    min_prompts: int | None = None
    min_support: float | None = None


@dataclass(frozen=True)
class Settings(Section):
    """The analysis' options and rules as recorded, in the order written: the
    bootstrap (``cluster``: its unit, ``clusters``: how many), then the rule set
    (``delta``: the verdict threshold, the CLI's ``--threshold``; ``alpha`` None: written
    before decision intervals, read at 95%) and its hash (also in the signature as
    ``rules:``)."""

    seed: int | None = None
    bootstrap: int | None = None
    level: float | None = None
    interval: str | None = None
    cluster: str | None = None
    clusters: int | None = None
    min_count: int | None = None
    confidence_bins: int | None = None
    support: SupportRules | None = None
    delta: float | None = None
    alpha: float | None = None
    decision_level: float | None = None
    min_prompts: int | None = None
    power: float | None = None
    power_effects: tuple[float, ...] = ()
    control_range: float | None = None
    rules_hash: str | None = None


@dataclass(frozen=True)
class Family(Section):
    """One drafter family (``trained`` or ``training_free``) pooled over its runs
    (``configurations``: the (method, k) of each)."""

    name: str
    gap_judged: Estimate | None = None
    gap_all: Estimate | None = None
    gap_length_standardised: LengthStandardised | None = None
    confidence: Split | None = None
    runs: tuple[str, ...] = ()
    configurations: tuple[tuple[str, int], ...] = ()
    acceptance: dict[str, Rate] = field(default_factory=dict)
    acceptance_judged: dict[str, Rate] = field(default_factory=dict)

    @property
    def ks(self) -> tuple[int, ...]:
        return tuple(sorted({k for _, k in self.configurations}))


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
    difference: Estimate | None = None


@dataclass(frozen=True)
class Explore(Figure):
    comparisons: int | None = None
    level: float | None = None
    classes: tuple[Comparison, ...] = ()


@dataclass(frozen=True)
class Gap(Figure):
    """The Japanese − English gap of one family (``family``) and its descriptive
    splits by token class."""

    family: str | None = None
    overall: Estimate | None = None
    judged: Estimate | None = None
    relative_judged: Estimate | None = None
    decomposition: dict[str, Split] = field(default_factory=dict)
    explore: Explore | None = None


@dataclass(frozen=True)
class PerK(Section):
    """A verdict of one k's runs alone, judged and on vLLM's all-token rate."""

    runs: tuple[str, ...] = ()
    verdict: str | None = None
    verdict_all_tokens: str | None = None
    gap: Reading | None = None
    gap_all: Reading | None = None


@dataclass(frozen=True)
class Sensitivity(Figure):
    """How a verdict moves with δ, with the all-token gap, per k, and under the first
    rules' 95% reading (docs/analysis.md). ``flip_below``/``flip_above``: (δ, verdict)
    where it changes nearest to the rule's δ."""

    delta: float | None = None
    flip_below: tuple[float, str] | None = None
    flip_above: tuple[float, str] | None = None
    all_tokens: str | None = None
    all_tokens_gap: Reading | None = None
    # the gate on the judged gap standardised by token byte length
    length_standardised: str | None = None
    length_standardised_gap: Reading | None = None
    per_k: dict[str, PerK] = field(default_factory=dict)
    previous: str | None = None
    previous_level: float | None = None
    previous_note: str | None = None
    not_computed: str | None = None

    @classmethod
    def parse(cls, data: Any) -> Sensitivity | None:
        if not isinstance(data, Mapping) or not data:
            return None
        flip = as_map(data.get("flip"))

        def point(side: str) -> tuple[float, str] | None:
            at = as_map(flip.get(side))
            d, v = as_float(at.get("delta")), as_str(at.get("verdict"))
            return (d, v) if d is not None and v is not None else None

        all_tokens = as_map(data.get("all_tokens"))
        length = as_map(data.get("length_standardised"))
        previous = as_map(data.get("previous_rule"))
        return read(
            cls,
            data,
            delta=as_float(flip.get("delta")),
            flip_below=point("below"),
            flip_above=point("above"),
            all_tokens=as_str(all_tokens.get("verdict")),
            all_tokens_gap=Reading.parse(all_tokens.get("gap")),
            length_standardised=as_str(length.get("verdict")),
            length_standardised_gap=Reading.parse(length.get("gap")),
            previous=as_str(previous.get("verdict")),
            previous_level=as_float(previous.get("level")),
            previous_note=as_str(previous.get("note")),
        )


@dataclass(frozen=True)
class Hypothesis(Section):
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
    control: Control | None = None  # H2: whether its control was read
    bounded: Bounded | None = None  # H2 where its control does not hold

    @property
    def effect_estimate(self) -> Estimate:
        """The effect as an :class:`Estimate` (for :func:`tokenlens.format.interval`)."""
        return Estimate(self.effect, self.ci_low, self.ci_high, None, self.not_estimable)


@dataclass(frozen=True)
class SpeedModel(Section):
    """The speed model of one run in one language (docs/analysis.md, "Speed model")."""

    traced_k: int | None = None
    measured_tokens_per_step: float | None = None
    predicted_tokens_per_step: float | None = None
    iid_tokens_per_step: float | None = None
    draft_cost: float | None = None
    recommended_k: int | None = None
    recommended_speedup: float | None = None


@dataclass(frozen=True)
class RunSummary(Section):
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
    # {lang: {position: rate}}: over the steps that proposed a draft at p
    by_position: dict[str, dict[str, PositionRate]] = field(default_factory=dict)
    by_position_conditional: dict[str, dict[str, Rate]] = field(default_factory=dict)
    text_per_step: dict[str, dict[str, Estimate]] = field(default_factory=dict)
    dtype: str | None = None
    device: str | None = None  # CPU, or the accelerator's name; None: not recorded
    replay_source: str | None = None
    replayed_from: str | None = None
    models: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def parse(cls, data: Any) -> RunSummary:
        d = as_map(data)
        speed = as_map(d.get("speed"))
        models = d.get("models")
        return read(
            cls,
            d,
            replayed=bool(d.get("replayed")),
            reconciled=as_bool(as_map(d.get("reconciliation")).get("matches")),
            draft_cost_source=as_str(speed.get("draft_cost_source")),
            speed={str(k): SpeedModel.parse(v) for k, v in as_map(speed.get("by_lang")).items()},
            models=tuple(m for m in models if isinstance(m, Mapping))
            if isinstance(models, list)
            else (),
        )


@dataclass(frozen=True)
class Scope(Figure):
    """What the per-language sections at the top of summary.json cover: one drafter
    family (``family``), its runs and their (method, k); ``note`` says what is pooled."""

    family: str | None = None
    runs: tuple[str, ...] = ()
    configurations: tuple[tuple[str, int], ...] = ()
    left_out: tuple[str, ...] = ()
    note: str | None = None


@dataclass(frozen=True)
class Summary:
    """The whole of summary.json. Sections a file lacks are empty (or None)."""

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
    rejections: dict[str, RejectionFamily] = field(default_factory=dict)  # per family
    rejection_runs: dict[str, RejectionRun] = field(default_factory=dict)  # per run
    byte_length: dict[str, ByteLength] = field(default_factory=dict)  # per family
    domains: dict[str, DomainFamily] = field(default_factory=dict)
    domain_source: str | None = None
    margin_in_speed: MarginInSpeed | None = None  # δ in speed terms per family and k

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
    breakdowns: dict[str, dict[str, dict[str, Rate]]] = {}
    for key, block in data.items():
        if isinstance(key, str) and key.startswith("by_") and isinstance(block, Mapping):
            read_rates = position_rates if key == "by_position" else rates
            breakdowns[key] = {str(lang): read_rates(groups) for lang, groups in block.items()}
    rejections = as_map(as_map(data.get("rejections")).get("families"))
    rejection_runs = as_map(as_map(data.get("rejections")).get("runs"))
    domains = as_map(data.get("domains"))
    return read(
        Summary,
        data,
        breakdowns=breakdowns,
        families={
            str(k): read(Family, v, name=str(k)) for k, v in as_map(data.get("families")).items()
        },
        warnings=as_strs(as_map(data.get("inputs")).get("warnings")),
        rejections={str(k): RejectionFamily.parse(v) for k, v in rejections.items()},
        rejection_runs={str(k): RejectionRun.parse(v) for k, v in rejection_runs.items()},
        byte_length={
            str(k): ByteLength.parse(v) for k, v in as_map(data.get("byte_length")).items()
        },
        domains={str(k): DomainFamily.parse(v) for k, v in as_map(domains.get("families")).items()},
        domain_source=as_str(domains.get("source")),
    )


def load_summary(path: Path) -> Summary:
    """Read and parse ``path`` (a summary.json, or the analysis directory holding one)."""
    return parse_summary(read_summary_json(path))


def read_summary_json(path: Path) -> Any:
    """The parsed JSON of ``path`` (a summary.json, or the analysis directory holding
    one), not yet checked; a missing or broken file raises :class:`TokenlensError`."""
    if path.is_dir():
        path = path / SUMMARY
    try:
        return json.loads(path.read_text("utf-8"))
    except FileNotFoundError as exc:
        raise TokenlensError(f"{path}: not found (run tokenlens analyze first)") from exc
    except (OSError, ValueError) as exc:
        raise TokenlensError(f"{path}: not valid JSON ({exc})") from exc
