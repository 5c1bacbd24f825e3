"""summary.json's ``runs[]`` as records: :class:`RunSummary` per analysed run, with its
speed model (:class:`RunSpeed`, :class:`SpeedModel`, :class:`SpeedAtK`).

Built by :mod:`~tokenlens.analysis.summarize` (the speed model by
:func:`tokenlens.analysis.speed.speed_model`), written by ``to_json`` and read back into
the same types; older files read (a missing key is None or empty).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tokenlens.analysis.summary_fields import OMITTED, Figure, Section, as_bool, as_map, read
from tokenlens.analysis.summary_figures import Estimate, PositionRate, Rate


@dataclass(frozen=True)
class SpeedAtK(Section):
    """The speed model at one k: tokens per step (measured curve and i.i.d.), the
    speedup and tokens per second (None without a measured baseline); ``extrapolated``
    beyond the traced k."""

    k: int | None = None
    tokens_per_step: float | None = None
    tokens_per_step_iid: float | None = None
    speedup: float | None = None
    tok_per_s: float | None = None
    extrapolated: bool | None = None


@dataclass(frozen=True)
class SpeedModel(Section):
    """The speed model of one run in one language (docs/analysis.md, "Speed model");
    ``no_recommendation`` (why) where no k is recommended."""

    draft_cost: float | None = None
    draft_cost_measured: bool | None = None
    traced_k: int | None = None
    iid_rate: float | None = None
    measured_tokens_per_step: float | None = None
    predicted_tokens_per_step: float | None = None
    iid_tokens_per_step: float | None = None
    recommended_k: int | None = None
    recommended_speedup: float | None = None
    per_k: tuple[SpeedAtK, ...] = ()
    no_recommendation: str | None = field(default=None, metadata=OMITTED)


@dataclass(frozen=True)
class RunSpeed(Figure):
    """A run's draft cost (where it comes from, whether measured) and its speed model
    per language (``by_lang``)."""

    draft_cost_source: str | None = None
    draft_cost: float | None = None
    draft_cost_measured: bool | None = None
    by_lang: dict[str, SpeedModel] = field(default_factory=dict)


@dataclass(frozen=True)
class RunSummary(Section):
    """One analysed run. ``k``: draft tokens per step; ``reconciliation`` (as the run
    check wrote it) says whether its events equal vLLM's counters. ``dtype``, ``device``,
    ``models`` and ``replay_source`` come from the manifest and are written together,
    only where ``models`` is not None (a simulated run has none)."""

    label: str | None = None
    path: str | None = None
    method: str | None = None
    k: int | None = None
    signature: str | None = None
    status: str | None = None
    replayed: bool = False
    replayed_from: str | None = None
    reconciliation: dict[str, Any] | None = None
    acceptance: dict[str, Rate] = field(default_factory=dict)
    acceptance_judged: dict[str, Rate] = field(default_factory=dict)
    # {lang: {position: rate}}: over the steps that proposed a draft at p
    by_position: dict[str, dict[str, PositionRate]] = field(default_factory=dict)
    by_position_conditional: dict[str, dict[str, Rate]] = field(default_factory=dict)
    text_per_step: dict[str, dict[str, Estimate]] = field(default_factory=dict)
    dtype: str | None = None
    device: str | None = None  # CPU, or the accelerator's name; None: not recorded
    models: tuple[Mapping[str, Any], ...] | None = None
    replay_source: str | None = None
    gap: Estimate | None = field(default=None, metadata=OMITTED)
    relative_gap_judged: Estimate | None = field(default=None, metadata=OMITTED)
    speed: RunSpeed | None = None

    PROVENANCE = ("dtype", "device", "models", "replay_source")

    @classmethod
    def parse(cls, data: Any) -> RunSummary:
        d = as_map(data)
        models = d.get("models")
        return read(
            cls,
            d,
            replayed=bool(d.get("replayed")),
            models=tuple(dict(m) for m in models if isinstance(m, Mapping))
            if isinstance(models, list)
            else None,
        )

    def to_json(self) -> dict[str, Any]:
        """Every field at its key; the manifest's four only with ``models``."""
        out = super().to_json()
        if self.models is None:
            out = {k: v for k, v in out.items() if k not in self.PROVENANCE}
        return out

    @property
    def reconciled(self) -> bool | None:
        """Whether the run's events equal vLLM's counters (None: not said)."""
        return as_bool(as_map(self.reconciliation).get("matches"))

    @property
    def draft_cost_source(self) -> str | None:
        return self.speed.draft_cost_source if self.speed is not None else None

    @property
    def speed_by_lang(self) -> dict[str, SpeedModel]:
        """The speed model per language (empty without one)."""
        return self.speed.by_lang if self.speed is not None else {}
