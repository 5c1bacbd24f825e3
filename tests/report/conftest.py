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
from tokenlens.report import write_analyze_report, write_tables
from tokenlens.testing import SCENARIOS, RunSpec, simulate_study, write_study


def _runs(root: Path, scenario: str, pairs: int, seed: int) -> tuple[Path, ...]:
    """A draft-model and an n-gram run of one test-bed study, in directories named by
    the methods.

    H1 is planted stronger than the test bed's 10 pp (text strength 1.5, about -15 pp
    of composition): these fixtures test how verdicts are rendered, not power, and a
    10 pp H1 at 30 prompts is `supported` in only ~90% of studies
    (docs/bench_verdicts.md), so a seed could land on `inconclusive`."""
    specs = [RunSpec(m, m, 3) for m in ("draft_model", "ngram")]
    sc = SCENARIOS[scenario]
    if sc.h1:
        sc = sc.with_confidence(ja_strength=1.5)
    study = simulate_study(sc, pairs, seed=seed, runs=specs)
    return tuple(write_study(study, root))


@pytest.fixture(scope="session")
def analysis(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An analysis of a trained drafter and an n-gram run with H1 and H2 planted, 30
    prompts per language (enough for every part of the confidence split to be
    estimable)."""
    root = tmp_path_factory.mktemp("sim")
    runs = _runs(root, "h1_h2", 30, seed=0)
    run_analyze(AnalyzeConfig(runs=runs, out=root / "ana", n_boot=50))
    write_tables(root / "ana")
    write_analyze_report(root / "ana")
    return root / "ana"


@pytest.fixture(scope="session")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A smoke-sized analysis (5 prompts per language): every verdict insufficient_data,
    and splits too thin to estimate."""
    root = tmp_path_factory.mktemp("small")
    runs = _runs(root, "h1_h2", 5, seed=10)
    run_analyze(AnalyzeConfig(runs=runs, out=root / "ana", n_boot=50))
    write_tables(root / "ana")
    return root / "ana"


@pytest.fixture(scope="session")
def poisoned(analysis: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same analysis with every text the page shows replaced by attack strings:
    request outputs (outputs.parquet: each request's output ends in one token per
    payload), token and draft texts, a run label, a class name and the hypotheses'
    evidence."""
    root = tmp_path_factory.mktemp("poisoned")
    summary = json.loads((analysis / "summary.json").read_text("utf-8"))
    for run in summary["runs"]:  # a copy of the runs, for the pages that link them
        src = Path(run["path"])
        shutil.copytree(src, root / src.name)
        run["path"] = str(root / src.name)
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
    outputs = pd.read_parquet(analysis / "outputs.parquet")
    ends = outputs.groupby(["run", "request_id"], sort=False)["output_index"].max()
    attack = pd.DataFrame(
        [
            {"run": run, "request_id": rid, "output_index": last + 1 + i, "text": payload}
            for (run, rid), last in ends.items()
            for i, payload in enumerate(PAYLOADS)
        ]
    )
    outputs = pd.concat([outputs, attack], ignore_index=True)
    outputs["run"] = outputs["run"].replace(renamed)
    pq.write_table(pa.Table.from_pandas(outputs, preserve_index=False), out / "outputs.parquet")
    return out
