"""Order does not matter: ``analyze A B`` and ``analyze B A`` write the same files.

The analysis sorts its runs by a canonical key (method, k, signature, then directory)
before anything reads them, so every permutation of the committed demo's runs gives
byte-identical summary.json, tables.md, tokens.parquet and outputs.parquet, one
signature included. Nothing here is a timestamp (summary.json records none), so
"timestamps aside" needs no masking; if one is ever added, mask it here.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from tests.support import REPO
from tokenlens.analysis import AnalyzeConfig, run_analyze
from tokenlens.analysis.pipeline import canonical_order
from tokenlens.report.tables import write_tables

RUNS = tuple(sorted(p for p in (REPO / "reports" / "demo" / "runs").iterdir() if p.is_dir()))
FILES = ("summary.json", "tables.md", "tokens.parquet", "outputs.parquet")


def test_demo_has_runs_to_permute() -> None:
    assert len(RUNS) >= 2


def test_every_order_gives_the_same_bytes(tmp_path: Path) -> None:
    written: dict[tuple[Path, ...], dict[str, bytes]] = {}
    for i, order in enumerate(itertools.permutations(RUNS)):
        out = tmp_path / f"order{i}"
        run_analyze(AnalyzeConfig(runs=order, out=out, n_boot=20, regression=False))
        write_tables(out)
        written[order] = {name: (out / name).read_bytes() for name in FILES}
    first, *others = written.values()
    for files in others:
        for name in FILES:
            assert files[name] == first[name], name
    summary = json.loads(first["summary.json"])
    # One signature, in the canonical order: the methods sorted (draft_model before ngram).
    methods = [entry["method"] for entry in summary["runs"]]
    assert methods == sorted(methods)
    assert "method:draft_model+ngram" in summary["signature"]


def test_the_key_is_method_then_k_then_name(tmp_path: Path) -> None:
    def run(name: str, method: str, k: int) -> Path:
        path = tmp_path / name
        path.mkdir()
        manifest = {"speculative": {"method": method, "num_speculative_tokens": k}}
        (path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
        return path

    a, b, c = run("z", "mtp", 2), run("y", "ngram", 3), run("x", "ngram", 1)
    broken = tmp_path / "broken"
    broken.mkdir()
    assert canonical_order((b, c, broken, a)) == (broken, a, c, b)
