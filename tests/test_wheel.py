"""The wheel a GPU user installs: built from this checkout, installed into a fresh venv.

The venv has no vLLM and no torch (core install). From it, ``tokenlens tokens`` runs on
a shipped corpus named by name, ``tokenlens analyze`` on a committed run directory,
and the shipped plans are found by name. The install takes the pinned dependencies
from the package indexes pip is configured with here; pip's cache makes repeats fast,
and ``--no-compile`` skips byte-compiling scipy and pandas (most of a cold install).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

RUN = REPO / "tests" / "data" / "run-ngram"
SOURCES = (
    "tokenlens",
    "corpora",
    "plans",
    "pyproject.toml",
    "setup.py",
    "MANIFEST.in",
    "README.md",
)


def sh(*cmd: str | Path, cwd: Path | None = None, timeout: float = 600) -> str:
    # No PYTHONPATH: the venv must import the installed wheel, never this checkout.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )
    assert proc.returncode == 0, f"{cmd}: {proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding only the built wheel and its core dependencies."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:  # a clean copy: no build/ or egg-info left in the checkout
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(path, src / name)
    pip = [sys.executable, "-m", "pip"]
    sh(*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp / "dist", src)
    (wheel,) = (tmp / "dist").glob("tokenlens-*.whl")
    env = tmp / "venv"
    sh(sys.executable, "-m", "venv", "--without-pip", env)
    python = env / "bin" / "python"
    sh(*pip, "--python", python, "install", "-q", "--no-compile", wheel, timeout=1200)
    return env


def test_core_install_has_no_vllm_and_no_torch(venv: Path, tmp_path: Path) -> None:
    code = (
        "import importlib.util as u, tokenlens\n"
        "print([m for m in ('vllm', 'torch') if u.find_spec(m)], tokenlens.__file__)"
    )
    missing, where = sh(venv / "bin" / "python", "-c", code, cwd=tmp_path).split(" ", 1)
    assert missing == "[]"
    assert where.strip().startswith(str(venv))  # the wheel, not this checkout


def test_doctor_without_vllm_fails_with_the_fix(venv: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [venv / "bin" / "tokenlens", "doctor"], cwd=tmp_path, capture_output=True, text=True,
        timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "fail  vLLM: not installed" in proc.stdout
    assert "fix: pip install 'tokenlens[gpu]' into your vLLM environment" in proc.stdout


def test_tokens_on_a_shipped_corpus(venv: Path, tmp_path: Path) -> None:
    out = tmp_path / "tok"
    sh(venv / "bin" / "tokenlens", "tokens", "--corpus", "demo", "--tokenizer", "qwen3.5",
       "--out", out, cwd=tmp_path)  # fmt: skip
    assert (out / "tokens.parquet").is_file() and (out / "summary.json").is_file()


def test_analyze_a_committed_run(venv: Path, tmp_path: Path) -> None:
    out = tmp_path / "analysis"
    sh(venv / "bin" / "tokenlens", "analyze", RUN, "--out", out, "--quiet", cwd=tmp_path)
    for name in ("tokens.parquet", "summary.json", "report.html", "FINDINGS.md"):
        assert (out / name).is_file(), name


def test_plans_by_name_and_readme_paths(venv: Path, tmp_path: Path) -> None:
    code = (
        "from tokenlens.packaged import resolve_plan, resolve_corpus\n"
        "from tokenlens.bench.plan import load_plan\n"
        "p = resolve_plan('qwen35-rtx4070'); print(p)\n"
        "print(resolve_plan('plans/demo-cpu.toml'), resolve_corpus('corpora/demo.jsonl'))\n"
        "print(len(load_plan(p).cases))\n"
    )
    lines = sh(venv / "bin" / "python", "-c", code, cwd=tmp_path).split()
    assert "site-packages/tokenlens/data/plans/qwen35-rtx4070.toml" in lines[0]
    assert lines[1].endswith("data/plans/demo-cpu.toml")
    assert lines[2].endswith("data/corpora/demo.jsonl")
    assert int(lines[3]) > 0  # the plan's ../corpora paths resolve inside the package
