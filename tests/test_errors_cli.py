"""Every command's error paths end in one line, never a traceback (issue 25).

Two sweeps, both in-process and fast (nothing here starts an engine or imports vLLM):
every numeric option with values that are not finite or out of range (refused while
parsing, before anything is created), and for each command the bad inputs a new user
meets (missing, empty, malformed, wrong kind of file, partial or newer runs).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support import REAL_RUN, REPO, assert_one_line_error, cli, copy_run, write_plan

SMOKE = str(REPO / "corpora" / "smoke.jsonl")

# (command and its required arguments, option, values that must be refused)
NUMERIC: list[tuple[list[str], str, list[str]]] = [
    (["trace", "--prompts", SMOKE], "--k", ["0", "-1", "2.5", "nan"]),
    (["trace", "--prompts", SMOKE], "--num-spec", ["0"]),
    (["trace", "--prompts", SMOKE], "--max-tokens", ["0", "-5", "inf"]),
    (["trace", "--prompts", SMOKE], "--cap-tokens", ["0"]),
    (["trace", "--prompts", SMOKE], "--temperature", ["-0.1", "nan", "inf", "-inf", "hot"]),
    (["trace", "--prompts", SMOKE], "--top-p", ["0", "1.5", "nan"]),
    (["trace", "--prompts", SMOKE], "--seed", ["-1", "x"]),
    (["trace", "--prompts", SMOKE], "--logprobs", ["-1", "21"]),
    (["trace", "--prompts", SMOKE], "--concurrency", ["0"]),
    (["trace", "--prompts", SMOKE], "--limit", ["0"]),
    (["trace", "--prompts", SMOKE], "--max-model-len", ["0"]),
    (["trace", "--prompts", SMOKE], "--server-timeout", ["0", "nan", "inf"]),
    (["trace", "--prompts", SMOKE], "--token-timeout", ["-1", "inf"]),
    (["analyze", str(REAL_RUN)], "--seed", ["-1"]),
    (["analyze", str(REAL_RUN)], "--bootstrap", ["0", "9"]),
    (["analyze", str(REAL_RUN)], "--min-count", ["0"]),
    (["analyze", str(REAL_RUN)], "--threshold", ["nan", "inf", "-0.01", "1"]),
    (["analyze", str(REAL_RUN)], "--alpha", ["0", "0.5", "nan"]),
    (["analyze", str(REAL_RUN)], "--min-prompts", ["0"]),
    (["analyze", str(REAL_RUN)], "--draft-cost", ["-1", "nan", "inf"]),
    (["analyze", str(REAL_RUN)], "--jobs", ["0", "-1", "two"]),
    (["replay", str(REAL_RUN)], "--k", ["0", "0-3", "a"]),
    (["replay", str(REAL_RUN)], "--prompt-lookup-min", ["0"]),
    (["replay", str(REAL_RUN)], "--prompt-lookup-max", ["-2"]),
    (["replay", str(REAL_RUN)], "--max-model-len", ["0"]),
    (["demo"], "--limit", ["0"]),
    (["demo"], "--max-tokens", ["-1"]),
]


@pytest.mark.parametrize(
    ("argv", "option", "value"),
    [(argv, option, value) for argv, option, values in NUMERIC for value in values],
)
def test_numeric_options_are_checked_while_parsing(
    tmp_path: Path, argv: list[str], option: str, value: str
) -> None:
    out = tmp_path / "out"
    status, _, err = cli([*argv, "--out", str(out), f"{option}={value}"])  # "-inf" too
    assert_one_line_error(status, err, f"argument {option}:", repr(value))
    assert not out.exists()


# -- each command's error paths -----------------------------------------------------------


def _file(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _killed(tmp_path: Path) -> str:
    run = copy_run(tmp_path / "killed")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["status"] = "partial"
    (run / "manifest.json").write_text(json.dumps(manifest))
    for name in ("requests.parquet", "events.parquet", "metrics.json"):
        (run / name).unlink()
    return str(run)


def _edited(tmp_path: Path, **fields: object) -> str:
    run = copy_run(tmp_path / "edited")
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps({**manifest, **fields}))
    return str(run)


def _garbled(tmp_path: Path) -> str:
    run = copy_run(tmp_path / "garbled")
    (run / "manifest.json").write_text("{not json")
    return str(run)


def _plan(tmp_path: Path, model: str) -> str:
    from tests.support import PLAN

    return str(write_plan(tmp_path, PLAN.replace('path = "some/model"', f'path = "{model}"')))


Case = Callable[[Path], list[str]]
ERROR_PATHS: dict[str, Case] = {
    "demo: --reanalyze a study that is not there": lambda t: [
        "demo", "--reanalyze", "--out", str(t / "nothing")
    ],
    "demo: --reanalyze with a trace option": lambda t: [
        "demo", "--reanalyze", "--limit", "3", "--out", str(t / "d")
    ],
    "demo: a corpus that does not exist": lambda t: ["demo", "--corpus", str(t / "no.jsonl")],
    "bench: a plan that does not exist": lambda t: ["bench", "--plan", str(t / "no.toml")],
    "bench: a plan that is not TOML": lambda t: [
        "bench", "--plan", _file(t, "p.toml", b"[bench\nname="), "--check"
    ],
    "bench: --check of a plan naming a model that does not exist (probe)": lambda t: [
        "bench", "--plan", _plan(t, "/no/such/model"), "--check"
    ],
    "bench: a misspelt embedded model": lambda t: [
        "bench", "--plan", _plan(t, "qwen2.5-coder-1.5b-instrct"), "--check"
    ],
    "bench: no --out": lambda t: ["bench", "--plan", _plan(t, "/no/such/model")],
    "trace: an empty prompt file": lambda t: [
        "trace", "--prompts", _file(t, "e.jsonl", b""), "--out", str(t / "r")
    ],
    "trace: a prompt file that is not UTF-8": lambda t: [
        "trace", "--prompts", _file(t, "l.jsonl", '{"id": "a"}\n'.encode("utf-16")),
        "--out", str(t / "r"),
    ],
    "trace: a line that is not JSON": lambda t: [
        "trace", "--prompts", _file(t, "j.jsonl", b"{\n"), "--out", str(t / "r")
    ],
    "trace: --out is a file": lambda t: [
        "trace", "--prompts", SMOKE, "--out", _file(t, "f", b"x")
    ],
    "trace: --resume a directory that is not a run": lambda t: [
        "trace", "--resume", str(t)
    ],
    "trace: --resume a complete run": lambda t: ["trace", "--resume", str(REAL_RUN)],
    "trace: --resume with another option": lambda t: [
        "trace", "--resume", _killed(t), "--temperature", "0.5"
    ],
    "trace: --spec-option without =": lambda t: [
        "trace", "--prompts", SMOKE, "--spec-option", "k3", "--out", str(t / "r")
    ],
    "replay: a run that does not exist": lambda t: ["replay", str(t / "no"), "--out", str(t)],
    "replay: a partial run": lambda t: ["replay", _killed(t), "--out", str(t / "o")],
    "replay: lookup min above max": lambda t: [
        "replay", str(REAL_RUN), "--method", "ngram", "--prompt-lookup-min", "5",
        "--prompt-lookup-max", "2", "--out", str(t / "o"),
    ],
    "analyze: a run that does not exist": lambda t: [
        "analyze", str(t / "no"), "--out", str(t / "o")
    ],
    "analyze: a killed run (probe)": lambda t: ["analyze", _killed(t), "--out", str(t / "o")],
    "analyze: a manifest that is not JSON": lambda t: [
        "analyze", _garbled(t), "--out", str(t / "o")
    ],
    "analyze: a run from a newer tokenlens": lambda t: [
        "analyze", _edited(t, format_version="2.0"), "--out", str(t / "o")
    ],
    "analyze: the same run twice": lambda t: [
        "analyze", str(REAL_RUN), str(REAL_RUN), "--out", str(t / "o")
    ],
    "analyze: --out is a file": lambda t: ["analyze", str(REAL_RUN), "--out", _file(t, "f", b"")],
    "analyze: --compare an unknown field": lambda t: [
        "analyze", str(REAL_RUN), "--out", str(t / "o"), "--compare", "colour"
    ],
    "tokens: a corpus that does not exist": lambda t: [
        "tokens", "--corpus", str(t / "no.jsonl"), "--out", str(t / "o")
    ],
    "tokens: an unknown tokenizer": lambda t: [
        "tokens", "--corpus", SMOKE, "--tokenizer", "nope", "--out", str(t / "o")
    ],
    "tokens: --out is a file": lambda t: [
        "tokens", "--corpus", SMOKE, "--tokenizer", "qwen2.5", "--out", _file(t, "f", b"")
    ],
    "models: an unknown model": lambda t: ["models", "path", "gpt-5"],
    "models: an unknown action": lambda t: ["models", "build"],
    "corpora: a directory that does not exist": lambda t: [
        "corpora", "check", "--dir", str(t / "no")
    ],
    "corpora: a directory of bad files": lambda t: [
        "corpora", "check", "--dir", str(Path(_file(t, "x.jsonl", b"{")).parent)
    ],
    "doctor: an unknown option": lambda t: ["doctor", "--fast"],
    "request_stats: a source that does not exist": lambda t: [
        "request-stats", str(t / "no.parquet"), "--out", str(t / "o.parquet")
    ],
    "request_stats: a source that is not Parquet": lambda t: [
        "request-stats", _file(t, "x.parquet", b"{}"), "--out", str(t / "o.parquet")
    ],
    "request_stats: a class column it does not know": lambda t: [
        "request-stats", str(t), "--by", "token_text", "--out", str(t / "o.parquet")
    ],
    "request_figures: a table that does not exist": lambda t: [
        "request-figures", str(t / "no.parquet"), "--out", str(t / "f.json")
    ],
    "request_figures: a file that is not Parquet": lambda t: [
        "request-figures", _file(t, "x.parquet", b"{}"), "--out", str(t / "f.json")
    ],
    "request_figures: fewer replicates than the least": lambda t: [
        "request-figures", str(t), "--bootstrap", "3", "--out", str(t / "f.json")
    ],
}  # fmt: skip


# Commands with progress bars get --quiet (bars would add lines to stderr).
QUIET = {"demo", "bench", "trace", "replay", "analyze", "tokens", "models"}


@pytest.mark.parametrize("case", list(ERROR_PATHS))
def test_every_command_fails_in_one_line_without_a_traceback(tmp_path: Path, case: str) -> None:
    argv = ERROR_PATHS[case](tmp_path)
    status, out, err = cli([*argv, "--quiet"] if argv[0] in QUIET else argv)
    assert "Traceback" not in out + err, err
    assert_one_line_error(status, err)


def test_every_command_has_an_error_path_here() -> None:
    from tokenlens.cli import _COMMANDS

    names = {m.__name__.rsplit(".", 1)[1] for m in _COMMANDS}
    assert names == {case.split(":")[0] for case in ERROR_PATHS}
