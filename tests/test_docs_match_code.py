"""Docs that match the code: options and files the docs name exist.

Every ``tokenlens COMMAND ... --option`` written in README.md or docs/*.md (in a code
span or a code block) must appear in that command's ``--help``, and every repository
path written in backticks (``tokenlens/...``, ``tests/...``, ``scripts/...``,
``benchmarks/...``, ``docs/...``, ``plans/...``, ``corpora/...``) must exist. Figures
(suite times, measured rates) are not checked here: they come from measurements.
"""

from __future__ import annotations

import argparse
import re
from functools import cache
from pathlib import Path

import pytest

from tokenlens.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
ROOTS = ("tokenlens", "tests", "scripts", "benchmarks", "docs", "plans", "corpora")
SPAN = re.compile(r"`([^`\n]+)`")
INVOCATION = re.compile(r"(?:^|[\s$(])tokenlens((?:\s+[a-z][a-z-]*)+)(.*)")
OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
PATH = re.compile(rf"^(?:{'|'.join(ROOTS)})/[\w./*-]*$")
BARE = re.compile(r"(--[a-z][a-z0-9-]*)(?:[ =]\S+)?")
# Options of other programs that the docs name on their own, and whose they are.
FOREIGN = {
    "--no-deps": "pip",
    "--per-request-spec-decode-metrics": "vllm serve",
    "--proxy-server": "Chromium",
}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@cache
def help_text(words: tuple[str, ...]) -> tuple[str, str] | None:
    """(command path, --help text) of the deepest (sub)command ``words`` name."""
    parser: argparse.ArgumentParser = build_parser()
    path: list[str] = []
    for word in words:
        sub = _subparsers(parser).get(word)
        if sub is None:
            break
        parser, path = sub, [*path, word]
    if not path:
        return None
    return " ".join(path), parser.format_help()


def code_pieces(text: str) -> list[str]:
    """Inline code spans and the lines of fenced code blocks (``\\`` continuations joined)."""
    pieces: list[str] = []
    blocks = text.split("```")
    for i, block in enumerate(blocks):
        if i % 2:
            pieces += block.replace("\\\n", " ").splitlines()
        else:
            pieces += SPAN.findall(block)
    return pieces


def invocations(text: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """(command words, options) of every ``tokenlens ...`` the text writes."""
    found = []
    for piece in code_pieces(text):
        for command in re.split(r"\||&&|;", piece):
            match = INVOCATION.search(command)
            if match:
                words = tuple(match.group(1).split())
                options = OPTION.findall(match.group(1) + match.group(2))
                found.append((words, options))
    return found


def missing_options(doc: Path) -> list[str]:
    bad = []
    for words, options in invocations(doc.read_text(encoding="utf-8")):
        known = help_text(words)
        if known is None:
            if words[0] not in {"-h", "--help", "--version"} and options:
                bad.append(f"{doc.name}: tokenlens {' '.join(words)}: no such command")
            continue
        command, helped = known
        for option in options:
            if option not in {"--help", "--version"} and not re.search(
                rf"(?<![\w-]){re.escape(option)}(?![\w-])", helped
            ):
                bad.append(f"{doc.name}: tokenlens {command} {option}: not in its --help")
    return bad


@cache
def every_help() -> str:
    """Every tokenlens command's --help, and the sources of the scripts and benchmarks."""
    texts = []
    stack = [build_parser()]
    while stack:
        parser = stack.pop()
        texts.append(parser.format_help())
        stack += _subparsers(parser).values()
    for folder in ("scripts", "benchmarks"):
        files = sorted((ROOT / folder).rglob("*.*"))  # packages under them too (control_kit)
        texts += [p.read_text(encoding="utf-8") for p in files if p.suffix in (".py", ".sh")]
    return "\n".join(texts)


def unknown_bare_options(doc: Path) -> list[str]:
    """A ``--option`` span written alone must be some tokenlens command's (or a script's)."""
    bad = []
    for span in SPAN.findall(doc.read_text(encoding="utf-8")):
        match = BARE.fullmatch(span.strip())
        if not match or match.group(1) in FOREIGN:
            continue
        if not re.search(rf"(?<![\w-]){re.escape(match.group(1))}(?![\w-])", every_help()):
            bad.append(f"{doc.name}: `{span}`: no command or script has this option")
    return bad


def missing_paths(doc: Path) -> list[str]:
    bad = []
    for span in SPAN.findall(doc.read_text(encoding="utf-8")):
        candidate = re.sub(r"(:[\w.:]+|[.,;)]+)$", "", span.strip())
        if not PATH.match(candidate) or "<" in candidate:
            continue
        if not any(ROOT.glob(candidate)) and not (ROOT / candidate).exists():
            bad.append(f"{doc.name}: `{span}` does not exist")
    return bad


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_options_named_in_docs_exist(doc: Path) -> None:
    assert missing_options(doc) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_options_named_alone_exist(doc: Path) -> None:
    assert unknown_bare_options(doc) == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_paths_named_in_docs_exist(doc: Path) -> None:
    assert missing_paths(doc) == []


def test_the_checks_catch_what_they_should(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "Run `tokenlens analyze RUN --out DIR --no-such-flag` and read `tokenlens/nowhere.py`.\n"
        "Set `--gone X`.\n"
        "```\ntokenlens trace --prompts P \\\n  --also-missing\n```\n",
        encoding="utf-8",
    )
    assert missing_options(doc) == [
        "x.md: tokenlens analyze --no-such-flag: not in its --help",
        "x.md: tokenlens trace --also-missing: not in its --help",
    ]
    assert missing_paths(doc) == ["x.md: `tokenlens/nowhere.py` does not exist"]
    assert unknown_bare_options(doc) == ["x.md: `--gone X`: no command or script has this option"]
