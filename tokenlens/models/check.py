"""Whether a model argument names a model that exists, checked before any engine starts.

vLLM finds a misspelt model only after its engine began to start (a minute or more
here, and a bench plan's later engines much later); this is the same decision made in
milliseconds from what a name can be: an embedded or tiny model, a local directory
(or GGUF file), or a Hugging Face hub id (``org/name``), which is accepted when it is in
the local cache or may still be downloaded (not when the hub is switched off).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tokenlens.models.embedded import ALIASES, EMBEDDED, lookup
from tokenlens.models.tiny import TINY_NAMES, is_tiny

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def _hub_cached(name: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    try:
        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # a malformed id or cache: not cached, as far as we can tell
        return False


def _offline() -> bool:
    return any(os.environ.get(var, "").strip().lower() in ("1", "true", "yes") for var in _OFFLINE)


def model_problem(name: str | None) -> str | None:
    """Why ``name`` cannot be a model vLLM will load (None: it can, as far as can be known)."""
    if name is None or lookup(name) is not None or is_tiny(name):
        return None
    path = Path(name).expanduser()
    if path.is_dir():
        if (path / "config.json").is_file() or any(path.glob("*.gguf")):
            return None
        return f"{name}: the directory holds no config.json (not a model directory)"
    if path.is_file():
        return None if path.suffix == ".gguf" else f"{name}: a file, not a model directory"
    if _HUB_ID.match(name) and not name.startswith((".", "~")):
        if _hub_cached(name) or not _offline():
            return None  # cached, or vLLM may download it
        return f"{name}: not in the local Hugging Face cache, and the hub is off (HF_HUB_OFFLINE)"
    known = sorted({*EMBEDDED, *ALIASES, *TINY_NAMES})
    return (
        f"no model {name!r}: not an embedded or tiny model ({', '.join(known)}), "
        "not a directory here, and not a hub id like 'Qwen/Qwen3.5-4B'"
    )
