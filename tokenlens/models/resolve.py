"""Model arguments as vLLM wants them: embedded and tiny names become built directories.

Above both registries (:mod:`tokenlens.models.embedded`, :mod:`tokenlens.models.tiny`,
which builds on the embedded drafter), so neither imports the other backwards.
"""

from __future__ import annotations

from pathlib import Path

from tokenlens.models.embedded import TARGET, ensure_model, lookup
from tokenlens.models.tiny import ensure_tiny, is_tiny
from tokenlens.progress import SILENT, Progress


def resolve_model(name: str | None, cache: Path | None = None, progress: Progress = SILENT) -> str:
    """A model argument as vLLM wants it: embedded and tiny names are built and become paths."""
    if name is None:
        return str(ensure_model(TARGET, cache, progress))
    embedded = lookup(name)
    if embedded is not None:
        return str(ensure_model(embedded, cache, progress))
    if is_tiny(name):
        return str(ensure_tiny(name, cache, progress))
    return name
