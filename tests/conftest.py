"""Shared fixtures: the embedded Qwen pair (built once, cached outside the repo)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def pair() -> tuple[Path, Path]:
    """(target dir, drafter dir) of the embedded models, built if the cache lacks them."""
    from tokenlens.models.embedded import ensure_pair

    return ensure_pair()
