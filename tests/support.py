"""Helpers shared by tests (importable as ``tests.support``)."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def write_prompts(path: Path, prompts: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts), "utf-8")
    return path


def japanese_share(text: str) -> float:
    """Share of kana/kanji among non-space characters."""
    chars = [c for c in text if not c.isspace()]
    ja = [c for c in chars if "\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff"]
    return len(ja) / max(1, len(chars))


def ascii_share(text: str) -> float:
    chars = [c for c in text if not c.isspace()]
    return sum(c.isascii() for c in chars) / max(1, len(chars))
