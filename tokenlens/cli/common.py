"""Small helpers shared by the command modules (argument types, progress choice).

Every numeric option is checked when it is parsed (finite, in range), so a bad value
is one line naming the option before anything starts or is written (docs/errors.md).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
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


def int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argument type: an integer in ``[low, high]`` (no upper bound without ``high``)."""
    wanted = f"an integer >= {low}" if high is None else f"an integer from {low} to {high}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
        return value

    return parse


def number_in(
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> Callable[[str], float]:
    """An argument type: a finite number within the bounds (open where said).

    ``nan`` and ``inf`` are refused: they pass every comparison check downstream in
    surprising ways, and NaN written into summary.json is not valid JSON.
    """
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high:g}")
    wanted = "a finite number" + (f" {' and '.join(parts)}" if parts else "")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
        if low is not None and (value < low or (low_open and value == low)):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
        if high is not None and (value > high or (high_open and value == high)):
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
        return value

    return parse


def typed_option(argv: Sequence[str], option_strings: Sequence[str]) -> str:
    """Which of an option's names the user typed (an abbreviation counts), else the first.

    So that messages say ``--k`` to a user who typed ``--k`` and ``--num-spec`` to one
    who typed that, never an alias they did not use.
    """
    typed = [a.split("=", 1)[0] for a in argv if a.startswith("--")]
    for option in option_strings:
        if option in typed:
            return option
    for option in option_strings:
        if any(len(t) > 2 and option.startswith(t) for t in typed):
            return option
    return option_strings[0] if option_strings else ""


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


# The fewest bootstrap replicates run_analyze accepts (checked at parse time too).
MIN_BOOTSTRAP = 10


def add_bootstrap_options(parser: argparse.ArgumentParser, min_count_help: str) -> None:
    """``--seed``, ``--bootstrap`` and ``--min-count``, as ``analyze`` reads them: a
    command that computes its figures gives the same flags the same meaning."""
    parser.add_argument("--seed", type=int_in(0), default=0, help="bootstrap seed (default: 0)")
    parser.add_argument(
        "--bootstrap",
        type=int_in(MIN_BOOTSTRAP),
        default=1000,
        metavar="N",
        help=f"bootstrap replicates, at least {MIN_BOOTSTRAP} (default: %(default)s)",
    )
    parser.add_argument(
        "--min-count",
        type=positive_int,
        default=30,
        metavar="N",
        help=f"{min_count_help} (default: %(default)s)",
    )


def add_rule_options(parser: argparse.ArgumentParser) -> None:
    """``--threshold``, ``--alpha`` and ``--min-prompts``: the verdict rules, as
    ``analyze`` reads them (``--alpha`` None: the rules' default)."""
    parser.add_argument(
        "--threshold",
        type=number_in(0.0, 1.0, high_open=True),
        default=0.02,
        metavar="T",
        help="the verdict threshold, in acceptance: the least Japanese deficit that counts "
        "(summary.json: settings.delta; default: %(default)s)",
    )
    parser.add_argument(
        "--alpha",
        type=number_in(0.0, 0.5, low_open=True, high_open=True),
        metavar="A",
        help="the one-sided level of each verdict reading: an effect is read as beyond the "
        "threshold when its (1 - 2A) interval clears it (summary.json: settings.alpha; "
        "default 0.05, the 90%% interval, as in two one-sided tests; reported intervals "
        "stay 95%%)",
    )
    parser.add_argument(
        "--min-prompts",
        type=positive_int,
        default=30,
        metavar="N",
        help="prompts per language below which both verdicts are insufficient_data "
        "(default: %(default)s)",
    )


def add_draft_cost_option(parser: argparse.ArgumentParser) -> None:
    """``--draft-cost``, as ``analyze`` reads it (None: the drafter family's default)."""
    parser.add_argument(
        "--draft-cost",
        type=number_in(0.0),
        metavar="C",
        help="draft cost / target cost for the speed model (>= 0)",
    )


def add_interval_option(parser: argparse.ArgumentParser) -> None:
    """``--interval``, as ``analyze`` reads it."""
    parser.add_argument(
        "--interval",
        choices=("t", "percentile"),
        default="t",
        help="interval method: t (bootstrap SE, t with G-1 df; Wilson for rates; measured "
        "coverage in docs/analysis.md) or percentile (default: %(default)s)",
    )
