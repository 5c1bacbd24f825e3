"""Progress reporting without printing from the core.

Core functions accept a :class:`Progress` and report stages and increments to it. The
CLI passes :class:`TqdmProgress` (bars on stderr); library users and tests get
:data:`SILENT` by default, so the core never writes to the terminal by itself.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol


class Progress(Protocol):
    """Receives progress of long work: a stage with an optional total, then advances."""

    def stage(self, name: str, total: float | None = None, unit: str = "it") -> None: ...

    def advance(self, amount: float = 1) -> None: ...

    def note(self, message: str) -> None: ...

    def close(self) -> None: ...


class SilentProgress:
    """Discards everything: the default for library calls and tests."""

    def stage(self, name: str, total: float | None = None, unit: str = "it") -> None:
        pass

    def advance(self, amount: float = 1) -> None:
        pass

    def note(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass


SILENT: Progress = SilentProgress()


class TqdmProgress:
    """One tqdm bar per stage on stderr; notes are printed above the bars."""

    def __init__(self) -> None:
        self._bar: Any = None

    def stage(self, name: str, total: float | None = None, unit: str = "it") -> None:
        from tqdm import tqdm

        self.close()
        scale = unit == "B"
        self._bar = tqdm(
            total=total,
            desc=name,
            unit=unit,
            unit_scale=scale,
            unit_divisor=1024 if scale else 1000,
            file=sys.stderr,
            dynamic_ncols=True,
            leave=True,
        )

    def advance(self, amount: float = 1) -> None:
        if self._bar is not None:
            self._bar.update(amount)

    def note(self, message: str) -> None:
        from tqdm import tqdm

        tqdm.write(message, file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
