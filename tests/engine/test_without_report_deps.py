"""Tracing needs neither altair nor vl-convert: only report making imports them.

A meta-path blocker makes ``import altair`` and ``import vl_convert`` fail in a fresh
interpreter, as on a user's machine where they are missing or broken; the CLI must
still start, offer ``trace``, and import everything a trace runs. The ``vllm`` test
traces a tiny model through the real CLI under the blocker and reads what the
manifest says about the engine (its facts and the engine option given).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, write_prompts

BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("altair", "vl_convert"):
            raise ImportError(f"{name} is blocked by the test")
sys.meta_path.insert(0, Block())
"""

# Every module a trace (local or served) and a bench case run through.
TRACE_PATH = (
    "tokenlens.cli",
    "tokenlens.trace",
    "tokenlens.rundir",
    "tokenlens.salvage",
    "tokenlens.engine.runner",
    "tokenlens.engine.worker",
    "tokenlens.engine.server",
    "tokenlens.engine.facts",
    "tokenlens.engine.options",
    "tokenlens.capture.plugin",
    "tokenlens.capture.summary",
    "tokenlens.bench.measure",
    "tokenlens.doctor",
)


def _python(code: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_the_blocker_blocks() -> None:
    done = _python("import altair")
    assert done.returncode != 0 and "blocked by the test" in done.stderr


def test_the_cli_starts_and_imports_the_trace_path_without_report_libraries() -> None:
    code = f"""
import importlib
for name in {TRACE_PATH!r}:
    importlib.import_module(name)
from tokenlens.cli import main
try:
    main(["trace", "--help"])
except SystemExit as exc:
    assert exc.code == 0, exc.code
assert not any(m.split(".")[0] in ("altair", "vl_convert") for m in sys.modules)
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--engine-option" in done.stdout


@pytest.mark.vllm
def test_a_tiny_trace_without_report_libraries_records_the_engine(tmp_path: Path) -> None:
    """One engine start: the CLI traces under the blocker; the manifest names the engine."""
    prompts = write_prompts(
        tmp_path / "p.jsonl",
        [{"id": "en", "lang": "en", "text": "Count from one to twenty in words."}],
    )
    out = tmp_path / "run"
    argv = [
        "trace", "--prompts", str(prompts), "--model", "tiny-qwen3", "--method", "ngram",
        "--k", "3", "--load-format", "dummy", "--max-tokens", "16", "--dtype", "float32",
        "--engine-option", "max_num_seqs=4", "--out", str(out), "--quiet",
    ]  # fmt: skip
    done = _python(f"from tokenlens.cli import main\nraise SystemExit(main({argv!r}))")
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["engine_options"] == {"max_num_seqs": 4}
    assert "engine:max_num_seqs=4" in manifest["signature"]
    engine = manifest["engine"]
    assert engine["source"] == "engine" and engine["unavailable"] == {}
    assert engine["model_runner"] in ("V1", "V2")  # the CPU build here: V1 (no Triton)
    assert engine["model_runner_class"].startswith("vllm.")
    assert (
        engine["drafter_class"].endswith("NgramProposer")
        or "ngram" in engine["drafter_class"].lower()
    )
    assert engine["async_scheduling"] is manifest["capture"]["async_scheduling"] is False
    assert engine["dtype"] == "float32" and engine["speculative_method"] == "ngram"
    assert engine["device"]["type"] == "cpu" and engine["device"]["workers"] == 1
    assert manifest["reconciliation"]["exact"]
    cache = manifest["prefix_cache"]  # vLLM's own prefix-cache counters, read by name
    assert cache["queried_tokens"] > 0 and cache["hit_tokens"] >= 0
