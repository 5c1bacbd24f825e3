"""The one exception type that the CLI turns into a one-line message.

Core code raises :class:`TokenlensError` for anything the user can fix (bad input,
missing files, an unreachable package index). The CLI prints ``tokenlens: error: <msg>``
and exits non-zero, so users never see a traceback for their own mistakes.
"""


class TokenlensError(Exception):
    """A user-facing failure with a one-line explanation."""

    def __init__(self, message: str) -> None:
        # Keep the message on one line: it is printed as-is by the CLI.
        super().__init__(" ".join(message.split()))
