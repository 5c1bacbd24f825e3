"""Reading vLLM's source files without importing vLLM: a wheel, a directory, the installed one.

Both the engine (which engine arguments this vLLM accepts) and the capture hook's
surface check (:mod:`tokenlens.capture.surface`) read vLLM's sources as text. The
readers live here, in the engine layer, so that the engine never imports the capture
plugin that sits above it (docs/architecture.md).
"""

from __future__ import annotations

import ast
import importlib.util
import zipfile
from collections.abc import Callable
from pathlib import Path

VERSION_FILE = "vllm/_version.py"

# A source file's text by its path relative to the directory holding ``vllm/``, or None.
Reader = Callable[[str], str | None]


def directory_reader(root: Path) -> Reader:
    """Sources under ``root`` (the directory holding ``vllm/``)."""

    def read(rel: str) -> str | None:
        path = root / rel
        return path.read_text(encoding="utf-8") if path.is_file() else None

    return read


def wheel_reader(wheel: Path) -> Reader:
    """Sources inside a wheel (a zip), read without extracting or importing."""
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())

    def read(rel: str) -> str | None:
        return archive.read(rel).decode("utf-8") if rel in names else None

    return read


def reader_for(path: Path) -> Reader:
    """A wheel file, a ``vllm/`` directory, or a directory that holds ``vllm/``."""
    if path.is_file() and path.suffix == ".whl":
        return wheel_reader(path)
    if (path / "v1").is_dir() and path.name == "vllm":
        return directory_reader(path.parent)
    if (path / "vllm").is_dir():
        return directory_reader(path)
    raise FileNotFoundError(f"{path}: neither a vLLM wheel nor a directory holding vllm/")


def installed_root() -> Path | None:
    """The directory holding the installed ``vllm/`` package, found without importing it."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def source_version(read: Reader) -> str | None:
    """``__version__`` from ``vllm/_version.py`` (written by vLLM's build)."""
    text = read(VERSION_FILE)
    if text is None:
        return None
    for node in ast.parse(text).body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
        ):
            return str(node.value.value)
    return None
