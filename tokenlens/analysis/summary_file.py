"""summary.json's schema: its sections as frozen records, and the one reader of the file.

:func:`load_summary` / :func:`parse_summary` take the file (or its parsed JSON) and
return a :class:`Summary`: every section a record (these; ``families``, ``h2_contrast``,
``gap`` of :mod:`~tokenlens.analysis.summary_gaps`; ``hypotheses`` of
:mod:`~tokenlens.analysis.summary_verdicts`; ``runs`` of
:mod:`~tokenlens.analysis.summary_runs`; the rest of
:mod:`~tokenlens.analysis.summary_sections`; the figures of
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
    as_map,
    as_str,
    as_strs,
    read,
)
from tokenlens.analysis.summary_figures import (
    Classes,
    Estimate,
    Rate,
    position_rates,
    rates,
)
from tokenlens.analysis.summary_gaps import Contrast, Family, Gap
from tokenlens.analysis.summary_runs import RunSummary
from tokenlens.analysis.summary_sections import (
    ByteLength,
    DomainFamily,
    MarginInSpeed,
    RejectionFamily,
    RejectionRun,
    Rejections,
)
from tokenlens.analysis.summary_verdicts import Hypothesis
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
    rejections = Rejections.parse(data.get("rejections")) or Rejections()
    domains = as_map(data.get("domains"))
    return read(
        Summary,
        data,
        breakdowns=breakdowns,
        families={
            str(k): read(Family, v, name=str(k)) for k, v in as_map(data.get("families")).items()
        },
        warnings=as_strs(as_map(data.get("inputs")).get("warnings")),
        rejections=rejections.families,
        rejection_runs=rejections.runs,
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
