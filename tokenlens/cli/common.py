"""Small helpers shared by the command modules (argument types, progress choice)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tokenlens.errors import TokenlensError
from tokenlens.progress import SILENT, Progress, TqdmProgress


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def existing_file(text: str) -> Path:
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"file not found: {text}")
    return path


def plan_file(text: str) -> Path:
    """A plan path or the name of a shipped plan (``qwen35-rtx4070``)."""
    from tokenlens.packaged import resolve_plan

    try:
        return resolve_plan(text)
    except TokenlensError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def corpus_file(text: str) -> Path:
    """A prompt file path or the name of a shipped corpus (``demo``)."""
    from tokenlens.packaged import resolve_corpus

    try:
        return resolve_corpus(text)
    except TokenlensError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quiet", action="store_true", help="no progress bars on stderr (errors still shown)"
    )


def progress_for(args: argparse.Namespace) -> Progress:
    """Bars on stderr unless --quiet."""
    if getattr(args, "quiet", False):
        return SILENT
    return TqdmProgress()


def formatter() -> type[argparse.HelpFormatter]:
    return argparse.RawDescriptionHelpFormatter


def say(message: str) -> None:
    """Results of a command (where its outputs are) go to stdout."""
    print(message, file=sys.stdout)
