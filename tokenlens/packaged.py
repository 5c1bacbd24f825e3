"""The corpora and bench plans that ship with tokenlens, found from a checkout or a wheel.

In a checkout they live at the repository root (``corpora/``, ``plans/``), which is
where the README's paths point. A built wheel carries copies as package data under
``tokenlens/data/`` (``setup.py`` copies them at build time), keeping the same
relative layout, so a plan's ``path = "../corpora/demo.jsonl"`` resolves in both.
Plans can be named (``--plan qwen35-rtx4070``) and corpora too (``--prompts demo``) as
well as given as paths; ``plans/NAME.toml`` and ``corpora/NAME.jsonl`` also find the
shipped files when the current directory is not a checkout.
"""

from __future__ import annotations

from pathlib import Path

from tokenlens.errors import TokenlensError

PACKAGE = Path(__file__).resolve().parent
CORPORA = "corpora"
PLANS = "plans"


def data_root() -> Path:
    """The directory holding ``corpora/`` and ``plans/``: package data, else the checkout."""
    packaged = PACKAGE / "data"
    if (packaged / CORPORA).is_dir():
        return packaged
    return PACKAGE.parent


def corpora_dir() -> Path:
    return data_root() / CORPORA


def plans_dir() -> Path:
    return data_root() / PLANS


def _shipped(folder: Path, suffix: str) -> list[str]:
    return sorted(p.stem for p in folder.glob(f"*{suffix}")) if folder.is_dir() else []


def _resolve(value: str | Path, folder: Path, suffix: str, what: str) -> Path:
    """An existing path, else a shipped file named ``NAME``, ``NAME.ext`` or ``dir/NAME.ext``."""
    path = Path(value)
    if path.is_file():
        return path
    name = path.name.removesuffix(suffix)
    shipped = folder / f"{name}{suffix}"
    if path.parent in (Path("."), Path(folder.name)) and shipped.is_file():
        return shipped
    known = ", ".join(_shipped(folder, suffix)) or "none"
    raise TokenlensError(f"file not found: {value} (nor a shipped {what}: {known})")


def resolve_plan(value: str | Path) -> Path:
    """A plan file: an existing path, or the name of a shipped plan (``qwen35-rtx4070``)."""
    return _resolve(value, plans_dir(), ".toml", "plan")


def resolve_corpus(value: str | Path) -> Path:
    """A prompt file: an existing path, or the name of a shipped corpus (``demo``)."""
    return _resolve(value, corpora_dir(), ".jsonl", "corpus")
