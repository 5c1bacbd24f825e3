"""Format versions of the files tokenlens writes, and the one rule for reading them.

Every manifest and summary carries ``format_version`` (``"MAJOR.MINOR"``). A minor
version adds keys or columns that older readers may ignore; a major version changes
what an existing one means. Readers keep reading every older version (a file written
before versions existed has none and reads as the first) and refuse a newer major
with one line, instead of reading it as if they understood it (docs/errors.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tokenlens.errors import TokenlensError

KEY = "format_version"

RUN = "run directory"
ANALYSIS = "analysis summary"
TOKENS = "tokens summary"
BENCH = "bench"

CURRENT: dict[str, tuple[int, int]] = {RUN: (1, 0), ANALYSIS: (1, 0), TOKENS: (1, 0), BENCH: (1, 0)}
"""What this tokenlens writes, per kind of file."""


def current(kind: str) -> str:
    """The version string this tokenlens writes for ``kind``."""
    major, minor = CURRENT[kind]
    return f"{major}.{minor}"


def stamp(kind: str) -> dict[str, str]:
    """``{"format_version": ...}`` to merge into a manifest or summary being written."""
    return {KEY: current(kind)}


def check_readable(data: Mapping[str, Any], kind: str, where: str | Path) -> None:
    """Refuse, in one line, a file of ``kind`` written in a newer major version.

    A missing version is an older file (read as it is); a malformed one is refused,
    because nothing tells what it means.
    """
    from tokenlens import __version__

    value = data.get(KEY)
    if value is None:
        return
    major, _ = CURRENT[kind]
    parts = str(value).split(".") if isinstance(value, str) else []
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise TokenlensError(f"{where}: {KEY} {value!r} is not MAJOR.MINOR (like '{major}.0')")
    if int(parts[0]) > major:
        raise TokenlensError(
            f"{where} was written by a newer tokenlens ({kind} format {value}; tokenlens "
            f"{__version__} reads up to {major}.x): upgrade tokenlens to read it"
        )
