"""Where assembled models live: a user cache directory, never the repository."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "TOKENLENS_CACHE"


def cache_root(override: str | Path | None = None) -> Path:
    """The cache root: ``override``, else ``$TOKENLENS_CACHE``, else the XDG cache dir.

    Models are large (GiBs) and rebuilt only when missing or corrupt, so they go to a
    per-user cache that survives re-clones of the repository.
    """
    if override is not None:
        return Path(override).expanduser()
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tokenlens"
