"""The exceptions that the CLI turns into a one-line message (docs/errors.md).

Core code raises :class:`TokenlensError` for anything the user can fix (bad input,
missing files, an unreachable package index, a full disk). The CLI prints
``tokenlens: error: <msg>`` and exits non-zero, so users never see a traceback for
their own mistakes or their machine's faults. :class:`Interrupted` is the same line for
a Ctrl-C that left something behind worth naming (a partial run and how to continue it).
"""


class TokenlensError(Exception):
    """A user-facing failure with a one-line explanation."""

    exit_status = 2  # the CLI's exit status for it (argparse uses 2 for usage errors too)

    def __init__(self, message: str) -> None:
        # Keep the message on one line: it is printed as-is by the CLI.
        super().__init__(" ".join(message.split()))


class Interrupted(TokenlensError):
    """Ctrl-C (or SIGTERM, SIGHUP), after what finished was kept: the message says where
    and what to type next. The exit status is 128 + the signal, as shells report it."""

    exit_status = 130  # 128 + SIGINT, as shells report an interrupted command

    def __init__(self, message: str, signal_number: int = 2) -> None:
        super().__init__(message)
        self.exit_status = 128 + signal_number


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP (``timeout``, ``docker stop``, Slurm, a closed terminal), raised
    where Ctrl-C raises KeyboardInterrupt so that both end a command the same way."""

    def __init__(self, signal_number: int, name: str) -> None:
        super().__init__(name)
        self.signal_number = signal_number
        self.name = name


def interruption(exc: KeyboardInterrupt) -> tuple[str, int]:
    """What stopped a command, for its one line, and the signal number (2: Ctrl-C)."""
    if isinstance(exc, Stopped):
        return f"stopped by {exc.name}", exc.signal_number
    return "interrupted", 2


def os_error_line(exc: OSError) -> str:
    """``No space left on device: /runs/x/events.parquet``: what failed, and where."""
    what = exc.strerror or type(exc).__name__
    where = exc.filename if exc.filename is not None else None
    return f"{what}: {where}" if where is not None else " ".join(str(exc).split()) or what
