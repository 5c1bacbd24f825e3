"""``tokenlens demo --reanalyze``: the last stage of a study again, on its committed runs.

Runs on a copy of the committed demo sample (no vLLM, no model weights: the runs'
tokenizer is a built-in one).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.support import assert_one_line_error, cli
from tokenlens.bench_results import read_results
from tokenlens.demo.sizes import smoke_note
from tokenlens.report.findings import findings_markdown

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "reports" / "demo"

# Floats written with their full repr (the charts' data): rounded to 12 significant
# digits, a last-bit difference between numpy or pandas releases disappears.
FULL_FLOAT = re.compile(rb"-?\d+\.\d{10,}(?:e-?\d+)?")


def ulp_free(text: bytes) -> bytes:
    return FULL_FLOAT.sub(lambda m: b"%.12g" % float(m.group()), text)


def locked_numerics() -> bool:
    """Whether numpy and pandas are the versions the committed sample was made with
    (requirements/cpu.lock): then the output must match it byte for byte."""
    import importlib.metadata as md

    lock = (ROOT / "requirements" / "cpu.lock").read_text(encoding="utf-8").splitlines()
    return all(f"{name}=={md.version(name)}" in lock for name in ("numpy", "pandas"))


pytestmark = pytest.mark.skipif(not DEMO.is_dir(), reason="reports/demo/ not committed")


def digests(root: Path, top: str) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((root / top).rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "demo"
    shutil.copytree(DEMO, out, symlinks=True)
    return out


def test_reanalyze_rewrites_the_analysis_and_leaves_the_runs(study: Path) -> None:
    before = {top: digests(study, top) for top in ("runs", "bench")}
    (study / "analysis" / "tables.md").unlink()
    (study / "FINDINGS.md").unlink()
    status, out, err = cli(["demo", "--reanalyze", "--out", str(study), "--quiet"])
    assert status == 0, err
    summary = json.loads((study / "analysis" / "summary.json").read_text("utf-8"))
    # Written by this version: the decision level is recorded, and the 5-prompt demo
    # decides nothing.
    assert summary["settings"]["alpha"] == pytest.approx(0.05)
    assert (study / "analysis" / "tables.md").is_file()
    assert {h["verdict"] for h in summary["hypotheses"].values()} == {"insufficient_data"}
    assert "H1: insufficient_data" in out and "H2: insufficient_data" in out
    # Every run of the study was analysed, in name order, with its bench.
    runs = sorted(p.name for p in (study / "runs").iterdir() if p.is_dir())
    assert [r["label"] for r in summary["runs"]] == runs
    findings = (study / "FINDINGS.md").read_text("utf-8")
    assert "decision interval" in findings and "Smoke-sized" in findings
    # FINDINGS.md is the renderer's text of the files the stage wrote and read (summary,
    # the bench's results and bench.json), under the size's note: what the demo writes.
    rows = read_results(study / "bench" / "results.csv")
    info = json.loads((study / "bench" / "bench.json").read_text("utf-8"))
    assert findings == findings_markdown(summary, rows, info, note=smoke_note("medium"))
    # Byte for byte what is committed: the committed sample is this version's output
    # (scripts/reanalyze_reports.sh), and a refactoring of the writers changes no byte.
    for name in ("FINDINGS.md", "analysis/tables.md", "analysis/report.html", "index.html"):
        made, committed = (study / name).read_bytes(), (DEMO / name).read_bytes()
        if locked_numerics():
            assert made == committed, name
        else:  # newer numpy/pandas (scripts/test_newest.sh): floats may differ in the last bit
            assert ulp_free(made) == ulp_free(committed), name
    assert (study / "index.html").is_file()
    assert {top: digests(study, top) for top in ("runs", "bench")} == before


def test_reanalyze_refuses_what_it_cannot_do(study: Path, tmp_path: Path) -> None:
    status, _, err = cli(["demo", "--reanalyze", "--out", str(tmp_path), "--quiet"])
    assert_one_line_error(status, err, "holds no run directory")
    status, _, err = cli(["demo", "--reanalyze", "--size", "full", "--out", str(study), "--quiet"])
    assert_one_line_error(status, err, "--size full", "give the size it was run with")
    status, _, err = cli(["demo", "--reanalyze", "--reuse", "--out", str(study), "--quiet"])
    assert_one_line_error(status, err, "drop --reuse")
