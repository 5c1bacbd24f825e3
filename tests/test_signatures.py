"""Every signature tokenlens writes is one ``key:value|...`` line that
:func:`tokenlens.signature.parse_signature` reads back: the tokens study, the analysis
(and the runs it lists), the bench and its cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import REPO, copy_run
from tokenlens.analysis import AnalyzeConfig, run_analyze
from tokenlens.bench_results import read_results
from tokenlens.signature import make_signature, parse_signature
from tokenlens.text.study import TokensConfig, run_tokens_study

MINI = REPO / "tests" / "text" / "data" / "mini.jsonl"
DEMO = REPO / "reports" / "demo"


def assert_parseable(signature: str, *keys: str) -> dict[str, str]:
    """Every ``|``-separated part is ``key:value``, the line is in canonical form (it
    survives a parse and a rewrite unchanged), and it names ``keys``."""
    fields = parse_signature(signature)
    assert len(fields) == len(signature.split("|")), signature
    assert make_signature(fields) == signature
    assert set(keys) <= set(fields), (keys, signature)
    return fields


def test_tokens_study_signature_parses(tmp_path: Path) -> None:
    result = run_tokens_study(TokensConfig(corpus=MINI, tokenizer="qwen3.5", out=tmp_path))
    summary = json.loads(result.summary_path.read_text("utf-8"))
    fields = assert_parseable(summary["signature"], "tokenlens", "tokenizer", "corpus", "study")
    assert fields["tokenizer"].startswith("qwen3.5") and fields["study"] == "tokens"


def test_analysis_signature_parses(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "run")
    config = AnalyzeConfig(runs=(run,), out=tmp_path / "an", n_boot=20, regression=False)
    result = run_analyze(config)
    summary = json.loads(result.summary_path.read_text("utf-8"))
    assert_parseable(summary["signature"], "tokenlens", "model", "method", "k")
    for entry in summary["runs"]:
        assert_parseable(entry["signature"], "tokenlens", "model", "method", "k")


@pytest.mark.parametrize("runs", ["demo", "full"])
def test_committed_run_signatures_parse(runs: str) -> None:
    manifests = sorted((REPO / "reports" / runs / "runs").glob("*/manifest.json"))
    assert manifests
    for path in manifests:
        manifest = json.loads(path.read_text("utf-8"))
        assert_parseable(manifest["signature"], "tokenlens", "model", "method", "k")


def test_bench_signatures_parse() -> None:
    info = json.loads((DEMO / "bench" / "bench.json").read_text("utf-8"))
    assert_parseable(info["signature"], "tokenlens", "plan")
    rows = read_results(DEMO / "bench" / "results.csv")
    assert rows
    for row in rows:
        assert_parseable(str(row["signature"]), "tokenlens", "model", "method", "k")
