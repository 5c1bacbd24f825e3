"""The scheduler-level suite against other vLLM releases' REAL scheduler classes.

vLLM 0.34 needs torch 2.14, which this machine cannot install; its scheduler is plain
Python all the same. ``scripts/vllm_source_tree.sh VERSION`` unpacks a release's wheel
without its compiled libraries into ``~/.cache/tokenlens/vllm-src/VERSION``; this test
runs ``test_scheduler_matrix.py`` in a fresh interpreter with that tree first on the
path (over the installed CPU build's torch and transformers), so every case drives the
release's own ``Scheduler`` / ``AsyncScheduler`` / ``ModelRunnerOutput`` and vLLM's own
counting. Only the platform's config hook is stubbed there (tests/capture/conftest.py:
it prepares kernels the scheduler never touches and refuses a machine without them).

A release whose tree is absent is skipped with the command that fetches it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = pytest.mark.vllm  # a minute per release: the whole matrix
RELEASES = ("0.34.0",)
TREES = Path(os.environ.get("TOKENLENS_CACHE", Path.home() / ".cache" / "tokenlens")) / "vllm-src"


@pytest.mark.parametrize("release", RELEASES)
def test_scheduler_matrix_on_the_release(release: str) -> None:
    tree = TREES / release
    if not (tree / "vllm" / "v1" / "core" / "sched" / "scheduler.py").is_file():
        pytest.skip(f"no vLLM {release} sources: bash scripts/vllm_source_tree.sh {release}")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tree), str(REPO)]),
        "VLLM_TARGET_DEVICE": "cpu",
        "TOKENLENS_VLLM_SOURCE_TREE": str(tree),
    }
    probe = subprocess.run(
        [sys.executable, "-c", "import vllm; print(vllm.__file__, vllm.__version__)"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.stdout.startswith(str(tree)), probe.stdout + probe.stderr[-2000:]
    assert probe.stdout.split()[-1] == release
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/capture/test_scheduler_matrix.py",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout.splitlines()[-1]
