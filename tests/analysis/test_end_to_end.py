"""Simulated run directories through the real join (tokenizer + MeCab) and the CLI."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tokenlens.analysis import AnalyzeConfig, run_analyze, summarize
from tokenlens.analysis.analyze import RunInfo
from tokenlens.analysis.simulate import Simulated, scenario, simulate
from tokenlens.cli import OneLineParser
from tokenlens.cli import analyze as analyze_cli
from tokenlens.errors import TokenlensError

SC = scenario(True, False, requests=12, steps=15, k=3)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Simulated], list[Path]]:
    root = tmp_path_factory.mktemp("sim")
    sims = [simulate(SC, "draft_model", seed=1), simulate(SC, "ngram", seed=2)]
    return sims, [s.write(root / s.method) for s in sims]


def _cli(argv: list[str]) -> int:
    """The root CLI's error handling around the analyze subcommand."""
    parser = OneLineParser(prog="tokenlens")
    analyze_cli.register(parser.add_subparsers(parser_class=OneLineParser))
    args = parser.parse_args(argv)
    try:
        result: int = args.handler(args)
    except TokenlensError as exc:
        print(f"tokenlens: error: {exc}")
        return 2
    return result


def test_join_classifies_the_planted_classes(
    runs: tuple[list[Simulated], list[Path]], tmp_path: Path
) -> None:
    sims, paths = runs
    result = run_analyze(AnalyzeConfig(runs=tuple(paths), out=tmp_path, n_boot=100))
    tokens = pq.read_table(result.tokens_path).to_pandas()
    assert len(tokens) == sum(len(s.events) for s in sims)
    planted = sims[0].frame(paths[0].name)
    mine = tokens[tokens["run"] == paths[0].name].reset_index(drop=True)
    judged = planted["judged"].to_numpy()
    assert (mine["judged"].to_numpy() == judged).all()
    assert (
        mine["script"][judged].to_numpy() == planted["script"][judged].astype(str).to_numpy()
    ).all()
    assert np.allclose(mine["top1_prob"][judged], planted["top1_prob"][judged])
    assert not mine["emitted_mismatch"].any()
    for run in result.summary["runs"]:
        assert run["reconciliation"]["matches"]


def test_file_and_in_memory_paths_agree(
    runs: tuple[list[Simulated], list[Path]], tmp_path: Path
) -> None:
    """summarize() on the simulator's frame = run_analyze() on the written runs."""
    sims, paths = runs
    config = AnalyzeConfig(runs=tuple(paths), out=tmp_path, n_boot=100, regression=False)
    on_disk = run_analyze(config).summary
    frame = pd.concat(
        [s.frame(p.name) for s, p in zip(sims, paths, strict=True)], ignore_index=True
    )
    info = [
        RunInfo(p.name, str(p), s.method, s.k, "x", "complete", s.counters().to_json())
        for s, p in zip(sims, paths, strict=True)
    ]
    in_memory = summarize(frame, info, config)
    for lang in ("ja", "en"):
        assert on_disk["acceptance"][lang]["rate"] == in_memory["acceptance"][lang]["rate"]
        for cls, entry in in_memory["by_script"][lang].items():
            assert on_disk["by_script"][lang][cls]["rate"] == entry["rate"]
            assert on_disk["by_script"][lang][cls]["n"] == entry["n"]


def test_cli_writes_outputs(
    runs: tuple[list[Simulated], list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, paths = runs
    out = tmp_path / "out"
    code = _cli(
        [
            "analyze",
            *map(str, paths),
            "--out",
            str(out),
            "--bootstrap",
            "50",
            "--seed",
            "3",
            "--quiet",
        ]
    )
    assert code == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert set(summary["hypotheses"]) == {"H1", "H2"}
    for key in ("acceptance", "by_script", "by_pos", "by_position"):
        for block in summary[key].values():
            for entry in block.values() if key != "acceptance" else [block]:
                assert {"rate", "ci_low", "ci_high", "n"} <= set(entry)
    assert "bootstrap:50,seed3" in summary["signature"]
    assert (out / "tokens.parquet").is_file() and (out / "tables.md").is_file()
    assert "H1:" in capsys.readouterr().out


def test_same_seed_same_numbers(runs: tuple[list[Simulated], list[Path]], tmp_path: Path) -> None:
    _, paths = runs
    a = run_analyze(AnalyzeConfig(runs=(paths[0],), out=tmp_path / "a", n_boot=60, seed=5))
    b = run_analyze(AnalyzeConfig(runs=(paths[0],), out=tmp_path / "b", n_boot=60, seed=5))
    c = run_analyze(AnalyzeConfig(runs=(paths[0],), out=tmp_path / "c", n_boot=60, seed=6))
    assert a.summary["acceptance"] == b.summary["acceptance"]
    assert a.summary["acceptance"]["ja"]["ci_low"] != c.summary["acceptance"]["ja"]["ci_low"]


def test_missing_run_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["analyze", str(tmp_path / "nope"), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    out = capsys.readouterr().out.strip()
    assert out.startswith("tokenlens: error: run directory not found") and "\n" not in out


def test_malformed_run_is_one_line(
    runs: tuple[list[Simulated], list[Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json", encoding="utf-8")
    assert _cli(["analyze", str(bad), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    assert "malformed JSON" in capsys.readouterr().out


def test_run_without_events_is_one_line(
    runs: tuple[list[Simulated], list[Path]], tmp_path: Path
) -> None:
    copy = tmp_path / "noevents"
    shutil.copytree(runs[1][0], copy)
    (copy / "events.parquet").unlink()
    with pytest.raises(TokenlensError, match=r"no events\.parquet"):
        run_analyze(AnalyzeConfig(runs=(copy,), out=tmp_path / "o", n_boot=20))


def test_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _cli(["analyze", "--help"])
    text = capsys.readouterr().out
    assert "examples:" in text and "judged" in text and "--bootstrap" in text


def test_parser_is_argparse() -> None:
    parser = argparse.ArgumentParser()
    analyze_cli.register(parser.add_subparsers())
    args = parser.parse_args(["analyze", "r1", "r2", "--out", "o"])
    assert args.runs == [Path("r1"), Path("r2")] and args.bootstrap == 1000
