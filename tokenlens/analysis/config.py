"""The options of one analysis, in a module of their own.

Both the input checks (:mod:`tokenlens.analysis.inputs`) and the pipeline that runs
after them (:mod:`tokenlens.analysis.pipeline`) read these options; keeping them here
lets the pipeline import the checks without the checks importing the pipeline back
(docs/architecture.md forbids import circles).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tokenlens.analysis.bootstrap import DEFAULT_METHOD
from tokenlens.analysis.decompose import Support
from tokenlens.analysis.rules import Rules


@dataclass(frozen=True)
class AnalyzeConfig:
    """Options of one analysis (all but ``jobs`` recorded in summary.json)."""

    runs: tuple[Path, ...]
    out: Path
    seed: int = 0
    n_boot: int = 1000
    min_count: int = 30
    tokenizer: str | None = None
    delta: float = 0.02
    alpha: float = Rules.alpha
    draft_cost: float | None = None
    bench: Path | None = None
    regression: bool = True
    min_prompts: int = 30
    interval: str = DEFAULT_METHOD
    support: Support = field(default_factory=Support)
    # Input checks (tokenlens.analysis.inputs): analyse partial / unreconciled runs anyway,
    # and write into an --out that holds files analyze did not write.
    allow_partial: bool = False
    allow_unreconciled: bool = False
    overwrite: bool = False
    # Runs that share requests (analysis/overlap.py): "refuse" or "keep-longest"; and
    # --strict: refuse prompts whose script contradicts their label (analysis/damage.py).
    overlap: str = "refuse"
    strict: bool = False
    # A prompt file whose tags.domain gives each prompt's domain (the per-domain gaps).
    prompts: Path | None = None
    # Drafter families of methods the method table does not know (--method-family):
    # {method: "trained" | "training_free"} (tokenlens.engine.methods.family_of).
    method_families: Mapping[str, str] = field(default_factory=dict)
    # The sections no verdict reads (per-class differences, per-k verdicts, domains,
    # rejections): the test bed leaves them out to measure the verdicts faster.
    details: bool = True
    # Processes for the join (analysis/chunks.py) and, from 2, one for the figures' gap
    # and rejection sections (analysis/summarize.py): None = one per core, at most 4;
    # the outputs do not depend on it (not recorded).
    jobs: int | None = None
