"""A real CPU trace on a vLLM version the tiers never saw: hooked, untested, still exact.

The installed vLLM 0.32.0 reports itself as 0.99.0 in every process of the run (a
``sitecustomize`` on ``PYTHONPATH`` patches ``vllm.__version__`` as vLLM is imported:
the engine core is another process, so a monkeypatch here would not reach it). The
surface is unchanged, so the plugin must install its hook, record the tier
``untested``, and the events must still reconcile exactly, in total and per request.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, check_events, write_prompts
from tokenlens.rundir import read_run

pytestmark = pytest.mark.vllm

UNSEEN = "0.99.0"
SITECUSTOMIZE = f'''
"""Test only: make the installed vLLM report version {UNSEEN} in this process."""
import importlib.abc
import importlib.machinery
import sys


class _UnseenVersion(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "vllm":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.__version__ = "{UNSEEN}"

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _UnseenVersion())
'''
PROMPTS = [
    {"id": "ja", "lang": "ja", "pair": "p", "max_tokens": 16,
     "text": "日本の四季について、日本語で2文で説明してください。"},
    {"id": "en", "lang": "en", "pair": "p", "max_tokens": 16,
     "text": "Describe the four seasons in Japan in two sentences, in English."},
]  # fmt: skip


def test_unseen_vllm_version_traces_as_untested_and_reconciles(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    patch = tmp_path / "patch"
    patch.mkdir()
    (patch / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    prompts = write_prompts(tmp_path / "p.jsonl", PROMPTS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(patch), str(REPO)])}
    cmd = [
        sys.executable, "-m", "tokenlens", "trace", "--prompts", str(prompts),
        "--method", "ngram", "--num-spec", "3", "--logprobs", "0", "--dtype", "float32",
        "--out", str(tmp_path / "run"), "--quiet",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = read_run(tmp_path / "run")
    capture = run.manifest["capture"]
    assert run.manifest["vllm_version"] == UNSEEN
    assert capture["tier"] == "untested", capture
    assert f"vLLM {UNSEEN} was never checked" in capture["tier_note"]
    assert capture["state"] == "ok" and capture["problems"] == []
    assert capture["async_scheduling"] is False  # the CPU platform turns it off
    assert capture["hook"]["steps"] > 0 and 0 <= capture["hook"]["share"] < 1
    assert run.manifest["reconciliation"] == {"exact": True, "differences": []}
    per_request = run.manifest["per_request_reconciliation"]
    assert per_request["available"] and per_request["level"] == "detailed", per_request
    assert per_request["requests"] == 2 and per_request["exact"], per_request
    assert run.metrics.num_drafts > 0
    check_events(run)
    log = (tmp_path / "run" / "engine.log").read_text(errors="replace")
    assert log.count("tokenlens: tracing an untested vLLM") >= 1
