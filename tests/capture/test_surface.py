"""The ast surface check on vLLM's real sources, intact and edited (no vLLM import)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO
from tokenlens.capture import surface
from tokenlens.capture.tiers import recorded, tier_for

ROOT = surface.installed_root()
pytestmark = [
    pytest.mark.vllm,  # the installed vLLM's sources
    pytest.mark.skipif(ROOT is None, reason="needs the installed vLLM's sources"),
]


def edited(old: str, new: str, rel: str = surface.SCHEDULER) -> surface.Reader:
    """The installed sources with one edit in one file (the edit must apply)."""
    assert ROOT is not None
    base = surface.directory_reader(ROOT)
    text = base(rel)
    assert text is not None and old in text, f"{old!r} not in {rel}"

    def read(path: str) -> str | None:
        return text.replace(old, new, 1) if path == rel else base(path)

    return read


def test_installed_vllm_matches_its_recorded_fingerprint() -> None:
    report = surface.check_installed()
    assert report is not None and report.ok, report and report.problem()
    assert report.fingerprint == recorded()[report.version or ""]["fingerprint"]
    assert tier_for(report.version, report).name == "verified"


def test_comments_do_not_change_the_fingerprint() -> None:
    read = edited("# Drop-mode stale output", "# an edited comment\n            # Drop-mode")
    report = surface.check_sources(read)
    assert report.fingerprint == surface.check_installed().fingerprint  # type: ignore[union-attr]


def test_a_changed_counting_rule_makes_the_release_untested() -> None:
    read = edited(
        "num_accepted = max(len(generated_token_ids) - num_sampled, 0)",
        "num_accepted = max(len(generated_token_ids) - num_sampled - 1, 0)",
    )
    report = surface.check_sources(read)
    assert report.ok  # the hook could still install ...
    assert report.fingerprint != surface.check_installed().fingerprint  # type: ignore[union-attr]
    tier = tier_for(report.version, report)  # ... but 0.32.0 no longer means what was checked
    assert tier.name == "untested" and "differs from the one recorded" in tier.note


def test_dropped_request_id_is_broken_with_its_name() -> None:
    read = edited("                    request_id=req_id,\n", "")
    report = surface.check_sources(read)
    assert not report.ok and report.fingerprint is None
    assert report.problem() == (
        "update_from_output calls make_spec_decoding_stats(request_id=) (1 call(s), none with "
        "request_id=)"
    )
    assert tier_for(report.version, report).name == "refused"


def test_renamed_runner_output_field_is_broken() -> None:
    read = edited(
        "    req_id_to_index: dict[str, int]",
        "    req_index: dict[str, int]",
        surface.RUNNER_OUTPUT,
    )
    problem = surface.check_sources(read).problem()
    assert (
        problem is not None and "ModelRunnerOutput fields (missing ['req_id_to_index']" in problem
    )


def test_async_scheduler_overriding_a_hooked_method_is_broken() -> None:
    read = edited(
        "    def _update_request_with_output(",
        "    def make_spec_decoding_stats(self, *a):\n        return None\n\n"
        "    def _update_request_with_output(",
        surface.ASYNC_SCHEDULER,
    )
    problem = surface.check_sources(read).problem()
    assert (
        problem
        == "AsyncScheduler keeps the hooked methods (overrides ['make_spec_decoding_stats'])"
    )


def test_script_checks_an_installed_directory() -> None:
    assert ROOT is not None
    proc = subprocess.run(
        [sys.executable, "scripts/check_vllm_surface.py", str(ROOT / "vllm")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "| Scheduler.make_spec_decoding_stats signature | holds |" in proc.stdout
    assert "tier today: verified" in proc.stdout


def test_script_refuses_a_path_without_vllm(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "scripts/check_vllm_surface.py", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "neither a vLLM wheel nor a directory" in proc.stderr


def test_a_missing_layout_field_is_reported_and_refuses_nothing() -> None:
    read = edited(
        "data_parallel_index: int = Field(init=False)",
        "data_parallel_idx: int = Field(init=False)",
        surface.PARALLEL_CONFIG,
    )
    report = surface.check_sources(read)
    assert report.ok  # a single-worker engine needs none of it
    assert report.fingerprint == surface.check_installed().fingerprint  # type: ignore[union-attr]
    row = next(a for a in report.assumptions if a.name == "ParallelConfig layout fields")
    assert not row.holds and not row.required and "data_parallel_index" in row.detail
