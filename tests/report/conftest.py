"""Fixtures: real analysis outputs of simulated runs, and a poisoned copy of them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support import PAYLOADS
from tokenlens.analysis import AnalyzeConfig, run_analyze
from tokenlens.analysis.simulate import scenario, simulate
from tokenlens.report import write_analyze_report


@pytest.fixture(scope="session")
def analysis(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An analysis of a trained drafter and an n-gram run, 30 prompts per language (enough
    for every part of the confidence split to be estimable)."""
    root = tmp_path_factory.mktemp("sim")
    sc = scenario(True, True, requests=30, steps=20, k=3)
    runs = tuple(
        simulate(sc, method, seed=i).write(root / method)
        for i, method in enumerate(("draft_model", "ngram"))
    )
    run_analyze(AnalyzeConfig(runs=runs, out=root / "ana", n_boot=50))
    write_analyze_report(root / "ana")
    return root / "ana"


@pytest.fixture(scope="session")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A smoke-sized analysis (5 prompts per language): every verdict insufficient_data,
    and splits too thin to estimate."""
    root = tmp_path_factory.mktemp("small")
    sc = scenario(True, True, requests=5, steps=8, k=3)
    runs = tuple(
        simulate(sc, method, seed=10 + i).write(root / method)
        for i, method in enumerate(("draft_model", "ngram"))
    )
    run_analyze(AnalyzeConfig(runs=runs, out=root / "ana", n_boot=50))
    return root / "ana"


@pytest.fixture(scope="session")
def poisoned(analysis: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same analysis with every text the page shows replaced by attack strings:
    request outputs (token ids that decode to them), token and draft texts, a run
    label, a class name and the hypotheses' evidence."""
    from tokenlens.text import load_tokenizer

    root = tmp_path_factory.mktemp("poisoned")
    summary = json.loads((analysis / "summary.json").read_text("utf-8"))
    vocab = load_tokenizer("qwen2.5")
    attack = [i for p in PAYLOADS for i in vocab.encode(p)]
    for run in summary["runs"]:
        src = Path(run["path"])
        dst = root / src.name
        shutil.copytree(src, dst)
        run["path"] = str(dst)
        requests = pq.read_table(dst / "requests.parquet")
        ids = [list(x) + attack for x in requests.column("output_token_ids").to_pylist()]
        index = requests.schema.get_field_index("output_token_ids")
        column = pa.array(ids, type=requests.schema.field(index).type)
        pq.write_table(
            requests.set_column(index, "output_token_ids", column), dst / "requests.parquet"
        )
    renamed = {summary["runs"][0]["label"]: PAYLOADS[3]}
    summary["runs"][0]["label"] = PAYLOADS[3]
    summary["hypotheses"]["H1"]["evidence"] = " ".join(PAYLOADS)
    summary["by_pos"]["ja"][PAYLOADS[1]] = summary["by_pos"]["ja"].popitem()[1]
    out = root / "ana"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps(summary, ensure_ascii=False), "utf-8")
    tokens = pd.read_parquet(analysis / "tokens.parquet")
    for column in ("token_text", "draft_text"):
        texts = [PAYLOADS[i % len(PAYLOADS)] for i in range(len(tokens))]
        tokens[column] = tokens[column].where(tokens[column].isna(), texts)
    tokens["run"] = tokens["run"].astype(str).replace(renamed)
    tokens.to_parquet(out / "tokens.parquet")
    return out
