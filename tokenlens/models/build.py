"""Build a model directory once, atomically, and know later whether it is still good.

The embedded models (converted from GGUF) and the tiny models (written from a config)
are built the same way: into ``NAME.building-PID`` beside the final directory, then a
completion marker naming what was built and every file's size (and, for the embedded
models, SHA-256), then one ``os.replace``. An interrupted build leaves no directory that
looks finished; a directory whose marker names another build is rebuilt. This module
is that routine, shared by :mod:`tokenlens.models.embedded` and
:mod:`tokenlens.models.tiny`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenlens.errors import TokenlensError
from tokenlens.progress import Progress

MARKER = "tokenlens-model.json"


def read_marker(
    directory: Path, expected: dict[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """A built directory's completion marker, if it carries ``expected``.

    Returns ``(marker, None)``, or ``(None, why)`` with ``why`` None when the marker is
    readable but was written for another build (the caller names that case).
    """
    marker_path = directory / MARKER
    if not marker_path.is_file():
        return None, "no completion marker (never built or interrupted)"
    try:
        marker = json.loads(marker_path.read_text())
    except ValueError:
        return None, "unreadable completion marker"
    if {k: marker.get(k) for k in expected} != expected:
        return None, None
    return marker, None


def remove_stale_builds(out: Path) -> list[Path]:
    """Remove ``NAME.building-PID`` directories whose builder process is gone.

    A build killed outright (SIGKILL, a lost machine) never reaches its own clean-up;
    the next build of the same model removes what it left. A directory whose process is
    still alive (a parallel build) is left alone. Returns the directories removed.
    """
    removed = []
    for tmp in out.parent.glob(f"{out.name}.building-*"):
        pid_text = tmp.name.rsplit("-", 1)[-1]
        if not pid_text.isdigit() or not tmp.is_dir() or _alive(int(pid_text)):
            continue
        shutil.rmtree(tmp, ignore_errors=True)
        removed.append(tmp)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def ensure_dir(
    out: Path,
    label: str,
    check: Callable[[Path], str | None],
    write: Callable[[Path], dict[str, Any]],
    progress: Progress,
) -> Path:
    """``out`` if ``check`` finds nothing wrong with it, else built anew by ``write``.

    ``write(tmp)`` fills the temporary directory and returns the marker to record
    (what was built and its files); the marker is written last, then the directory
    replaces ``out`` in one step.
    """
    remove_stale_builds(out)
    problem = check(out) if out.exists() else "not built"
    if problem is None:
        return out
    if out.exists():
        progress.note(f"rebuilding {label}: {problem}")
    tmp = out.with_name(f"{out.name}.building-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        marker = write(tmp)
        (tmp / MARKER).write_text(json.dumps(marker, indent=2) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    except OSError as exc:
        where = out.parent.parent
        raise TokenlensError(f"cannot build {label} in {where}: {exc.strerror or exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
