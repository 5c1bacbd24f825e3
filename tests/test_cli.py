"""The CLI teaches (--help with examples) and fails in one line (no traceback)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, assert_one_line_error, cli
from tokenlens.cli import build_parser, main


def commands() -> list[str]:
    """Every command the parser registers (a new one is checked without editing this)."""
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(sub.choices)


def test_every_command_is_checked() -> None:
    assert set(commands()) >= {"demo", "bench", "trace", "replay", "analyze", "tokens",
                               "models", "corpora", "doctor"}  # fmt: skip


@pytest.mark.parametrize("command", commands())
def test_each_command_help_has_examples(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([command, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out and f"tokenlens {command}" in out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["bogus"], "invalid choice: 'bogus'"),
        (["trace", "--out", "x"], "the following arguments are required: --prompts"),
        (["trace", "--prompts", "missing.jsonl", "--out", "x"], "file not found: missing.jsonl"),
        (
            ["trace", "--prompts", "corpora/smoke.jsonl", "--out", "x", "--num-spec", "0"],
            "positive integer",
        ),
        (["analyze", "no/such/run", "--out", "x"], "run directory not found"),
        (["models", "ensure", "gpt-5"], "unknown embedded model 'gpt-5'"),
        (
            ["tokens", "--corpus", "corpora/smoke.jsonl", "--tokenizer", "nope", "--out", "x"],
            "unknown tokenizer",
        ),
    ],
)
def test_bad_input_is_one_line(
    argv: list[str], needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process (the real ``main``; a fresh interpreter per case cost ~6 s each): the
    process-level behaviour is the next test's."""
    monkeypatch.chdir(REPO)
    status, _, err = cli(argv)
    assert status == 2
    assert_one_line_error(status, err, needle)
    assert not (REPO / "x").exists()


def test_bad_input_exits_2_with_one_line_from_the_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tokenlens", "bogus"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "invalid choice: 'bogus'" in proc.stderr and "Traceback" not in proc.stderr


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "Start here:" in capsys.readouterr().err
