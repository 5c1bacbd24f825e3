"""Simulated run directories through the real join (tokenizer + MeCab) and the CLI.

The runs come from the independent test bed (tokenlens.testing): real Qwen2.5 text,
the target's top-5 logprobs, events from vLLM's step process, counters derived from
the events, written by the same RunWriter as a captured run.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tests.support import assert_one_line_error, cli
from tokenlens.analysis import AnalyzeConfig, run_analyze
from tokenlens.cli import analyze as analyze_cli
from tokenlens.errors import TokenlensError
from tokenlens.report.findings import findings_markdown
from tokenlens.rundir import read_run
from tokenlens.testing import SCENARIOS, Study, simulate_study, write_study
from tokenlens.testing.estimator import analyze, key_estimates
from tokenlens.text import load_tokenizer

N_PAIRS = 12


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Study, list[Path]]:
    root = tmp_path_factory.mktemp("sim")
    study = simulate_study(SCENARIOS["h1_h2"], N_PAIRS, seed=1)
    return study, write_study(study, root)


def test_join_classifies_the_planted_classes(
    runs: tuple[Study, list[Path]], tmp_path: Path
) -> None:
    study, paths = runs
    result = run_analyze(AnalyzeConfig(runs=tuple(paths), out=tmp_path, n_boot=100))
    tokens = pq.read_table(result.tokens_path).to_pandas()
    assert len(tokens) == sum(len(r.events) for r in study.runs)
    planted = study.frame()
    for path in paths:
        mine = tokens[tokens["run"] == path.name].reset_index(drop=True)
        sim = planted[planted["run"] == path.name].reset_index(drop=True)
        judged = sim["judged"].to_numpy()
        assert (mine["judged"].to_numpy() == judged).all()
        assert (mine["accepted"].to_numpy() == sim["accepted"].to_numpy()).all()
        has_out = sim["output_index"].to_numpy() >= 0
        assert (
            mine["script"][has_out].astype(str).to_numpy()
            == sim["script"][has_out].astype(str).to_numpy()
        ).all()
        assert np.allclose(mine["top1_prob"][has_out], sim["top1_prob"][has_out])
        assert mine["top1_prob"][~has_out].isna().all()
        assert not mine["emitted_mismatch"].any()
    for run in result.summary["runs"]:
        assert run["reconciliation"]["matches"]
        # The counters the events imply, counted here from the planted rows (not from the
        # events file the analysis read), next to the run's own.
        sim = planted[planted["run"] == run["label"]]
        k = int(run["k"])
        assert run["reconciliation"]["events"] == {
            "num_drafts": int(sim.groupby(["request_id", "step"], observed=True).ngroups),
            "num_draft_tokens": len(sim),
            "num_accepted_tokens": int(sim["accepted"].sum()),
            "accepted_per_position": [int(sim["accepted"][sim["position"] == j].sum())
                                      for j in range(k)],
        }  # fmt: skip
        assert run["reconciliation"]["events"] == run["reconciliation"]["vllm"]
        assert run["reconciliation"]["events"]["num_draft_tokens"] > 0


def test_counters_that_disagree_with_the_events_are_caught(
    runs: tuple[Study, list[Path]], tmp_path: Path
) -> None:
    """The reconciliation compares two sources: a metrics.json that does not say what the
    events say (one accepted draft too many) stops the analysis, and with
    --allow-unreconciled the summary shows the difference."""
    import json
    import shutil

    from tokenlens.errors import TokenlensError

    _, paths = runs
    copy = tmp_path / paths[0].name
    shutil.copytree(paths[0], copy)
    metrics = json.loads((copy / "metrics.json").read_text())
    metrics["num_accepted_tokens"] += 1
    (copy / "metrics.json").write_text(json.dumps(metrics))
    with pytest.raises(TokenlensError, match="do not match the run's counters"):
        run_analyze(AnalyzeConfig(runs=(copy,), out=tmp_path / "refused", n_boot=20))
    result = run_analyze(
        AnalyzeConfig(runs=(copy,), out=tmp_path / "out", n_boot=20, allow_unreconciled=True)
    )
    (run,) = result.summary["runs"]
    assert run["reconciliation"]["matches"] is False
    assert any("num_accepted_tokens" in d for d in run["reconciliation"]["differences"])
    assert run["reconciliation"]["vllm"]["num_accepted_tokens"] == (
        run["reconciliation"]["events"]["num_accepted_tokens"] + 1
    )


def test_outputs_hold_every_output_token(runs: tuple[Study, list[Path]], tmp_path: Path) -> None:
    """outputs.parquet: one row per output token of every request, in order; a request's
    texts are its decoded output, and the judged rows' texts are tokens.parquet's
    token_text (byte fragments aside)."""
    _, paths = runs
    result = run_analyze(AnalyzeConfig(runs=tuple(paths), out=tmp_path, n_boot=20))
    outputs = pd.read_parquet(result.outputs_path)
    assert list(outputs.columns) == ["run", "request_id", "output_index", "text"]
    for path in paths:
        mine = outputs[outputs["run"] == path.name]
        run = read_run(path)
        vocab = load_tokenizer(str(run.manifest["tokenizer"]))
        requests = run.requests.to_pylist()
        assert len(mine) == sum(len(r["output_token_ids"]) for r in requests)
        for r in requests:
            rows = mine[mine["request_id"] == r["request_id"]]
            ids = r["output_token_ids"]
            assert rows["output_index"].tolist() == list(range(len(ids)))
            decoded = b"".join(vocab.pieces(ids)).decode("utf-8", "replace")
            assert "".join(rows["text"]) == decoded
    tokens = pd.read_parquet(result.tokens_path)
    shown = tokens[tokens["judged"] & tokens["output_index"].notna()]
    judged = shown.merge(outputs, on=["run", "request_id", "output_index"])
    assert len(judged) == len(shown) > 0
    whole = ~judged["token_text"].str.contains("\\x", regex=False)  # not a byte fragment
    assert whole.mean() > 0.5
    assert (judged["text"][whole] == judged["token_text"][whole]).all()


def test_file_and_in_memory_paths_agree(runs: tuple[Study, list[Path]], tmp_path: Path) -> None:
    """summarize() on the test bed's frame = run_analyze() on the written runs."""
    study, paths = runs
    config = AnalyzeConfig(runs=tuple(paths), out=tmp_path, n_boot=100, seed=0)
    on_disk = run_analyze(config).summary
    in_memory = analyze(study, 100, seed=0, min_prompts=config.min_prompts)
    assert key_estimates(on_disk) == key_estimates(in_memory)
    for h in ("H1", "H2"):
        assert on_disk["hypotheses"][h]["verdict"] == in_memory["hypotheses"][h]["verdict"]
    for lang in ("ja", "en"):
        assert on_disk["acceptance"][lang]["rate"] == in_memory["acceptance"][lang]["rate"]


def test_cli_writes_outputs(runs: tuple[Study, list[Path]], tmp_path: Path) -> None:
    _, paths = runs
    out = tmp_path / "out"
    code, stdout, stderr = cli(
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
    assert code == 0, stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert set(summary["hypotheses"]) == {"H1", "H2"}
    for key in ("acceptance", "by_script", "by_pos", "by_position"):
        for block in summary[key].values():
            for entry in block.values() if key != "acceptance" else [block]:
                assert {"rate", "ci_low", "ci_high", "n"} <= set(entry)
    assert "bootstrap:50,seed3" in summary["signature"]
    assert (out / "tokens.parquet").is_file() and (out / "tables.md").is_file()
    assert (out / "outputs.parquet").is_file()
    assert "H1:" in stdout
    # FINDINGS.md from the demo's writer, beside the report; analyze may write there again.
    findings = (out / "FINDINGS.md").read_text(encoding="utf-8")
    assert findings == findings_markdown(summary) and (out / "report.html").is_file()
    again = cli(["analyze", *map(str, paths), "--out", str(out), "--bootstrap", "50", "--quiet"])
    assert again[0] == 0, again[2]


def test_same_seed_same_numbers(runs: tuple[Study, list[Path]], tmp_path: Path) -> None:
    _, paths = runs
    a = run_analyze(AnalyzeConfig(runs=(paths[0],), out=tmp_path / "a", n_boot=60, seed=5))
    b = run_analyze(AnalyzeConfig(runs=(paths[0],), out=tmp_path / "b", n_boot=60, seed=5))
    c = run_analyze(AnalyzeConfig(runs=(paths[0],), out=tmp_path / "c", n_boot=60, seed=6))
    assert a.summary["acceptance"] == b.summary["acceptance"]
    assert a.summary["acceptance"]["ja"]["ci_low"] != c.summary["acceptance"]["ja"]["ci_low"]


def test_missing_run_is_one_line(tmp_path: Path) -> None:
    """Through the real ``tokenlens.cli.main``: one line on stderr, exit status 2."""
    status, stdout, stderr = cli(
        ["analyze", str(tmp_path / "nope"), "--out", str(tmp_path / "o"), "--quiet"]
    )
    assert status == 2 and stdout == ""
    assert_one_line_error(status, stderr)
    assert stderr.startswith("tokenlens: error: run directory not found")


def test_malformed_run_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text("{not json", encoding="utf-8")
    status, stdout, stderr = cli(["analyze", str(bad), "--out", str(tmp_path / "o"), "--quiet"])
    assert status == 2 and stdout == ""
    assert_one_line_error(status, stderr, "tokenlens: error: ", "malformed JSON")
    assert not (tmp_path / "o").exists()  # refused before any work


def test_run_without_events_is_one_line(runs: tuple[Study, list[Path]], tmp_path: Path) -> None:
    copy = tmp_path / "noevents"
    shutil.copytree(runs[1][0], copy)
    (copy / "events.parquet").unlink()
    with pytest.raises(TokenlensError, match=r"no events\.parquet"):
        run_analyze(AnalyzeConfig(runs=(copy,), out=tmp_path / "o", n_boot=20))


def test_help_teaches() -> None:
    status, text, _ = cli(["analyze", "--help"])
    assert status == 0
    assert "examples:" in text and "judged" in text and "--bootstrap" in text


def test_parser_is_argparse() -> None:
    """The CLI's own parser (argparse) reads analyze's arguments and hands them to the
    analyze command's handler."""
    from tokenlens.cli import build_parser

    parser = build_parser()
    assert isinstance(parser, argparse.ArgumentParser)
    args = parser.parse_args(["analyze", "r1", "r2", "--out", "o"])
    assert args.runs == [Path("r1"), Path("r2")] and args.out == Path("o")
    assert args.bootstrap == 1000
    assert args.handler.__module__ == analyze_cli.__name__
