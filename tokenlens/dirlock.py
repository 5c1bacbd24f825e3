"""An exclusive lock on a directory while one process writes it (run directories).

Its own module because it knows nothing about what the directory holds: the run
directory's writer (:class:`tokenlens.rundir.RunWriter`) takes it on the first write.
"""

from __future__ import annotations

import os
from pathlib import Path

from tokenlens.errors import TokenlensError


class DirLock:
    """An exclusive lock on a run directory while one process writes it.

    ``flock`` on the directory itself: no lock file to leave behind, and the kernel
    drops the lock when the holder exits, however it dies (SIGKILL included), so a
    crashed trace never leaves a stale lock. A second writer is refused in one line.
    """

    def __init__(self, path: Path) -> None:
        import fcntl

        self.path = path
        self._fd: int | None = None
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError as exc:
            raise TokenlensError(f"cannot open {path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise TokenlensError(
                f"another tokenlens is writing {path} right now: wait for it to finish, "
                "or give another --out"
            ) from None
        except OSError:  # a file system without flock: nothing to guard with
            pass
        self._fd = fd

    @staticmethod
    def held(path: Path) -> bool:
        """Whether another process holds the lock of ``path`` (checked, not kept)."""
        if not path.is_dir():
            return False
        try:
            DirLock(path).release()
        except TokenlensError:
            return True
        return False

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.release()
