"""The plugin against the real vLLM scheduler class: inert unless asked, loud if unfit."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm", reason="the vLLM CPU build is part of the test environment")

from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler

from tokenlens.capture import plugin
from tokenlens.engine.config import TRACE_DIR_ENV

pytestmark = pytest.mark.vllm  # vLLM's real Scheduler class (imported, no engine)
ORIGINAL_UPDATE = Scheduler.update_from_output
ORIGINAL_STATS = Scheduler.make_spec_decoding_stats


@pytest.fixture(autouse=True)
def restore() -> Any:
    yield
    plugin.uninstall()
    assert Scheduler.update_from_output is ORIGINAL_UPDATE
    assert "__init_subclass__" not in Scheduler.__dict__


def statuses(directory: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("capture-*.json"))]


def test_disabled_plugin_patches_nothing_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(TRACE_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    from vllm.plugins import load_general_plugins

    load_general_plugins()  # goes through the installed entry point
    plugin.register()
    assert Scheduler.update_from_output is ORIGINAL_UPDATE
    assert Scheduler.make_spec_decoding_stats is ORIGINAL_STATS
    assert list(tmp_path.iterdir()) == []


def test_enabled_plugin_wraps_both_methods(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(TRACE_DIR_ENV, str(tmp_path / "capture"))
    plugin.register()
    plugin.register()  # loaded twice in one process: still wrapped once
    wrapped = Scheduler.update_from_output
    assert wrapped is not ORIGINAL_UPDATE
    assert wrapped.__tokenlens_original__ is ORIGINAL_UPDATE
    assert Scheduler.make_spec_decoding_stats.__tokenlens_original__ is ORIGINAL_STATS
    assert AsyncScheduler.update_from_output is wrapped  # inherited, not overridden
    assert not (tmp_path / "capture").exists()  # files open on the first step only


def test_installed_vllm_is_verified() -> None:
    _, report, tier = plugin.check_running()
    assert report.ok, report.problem()
    assert tier.name == "verified", tier.note


def test_unseen_version_is_untested_and_still_hooked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import vllm

    monkeypatch.setattr(vllm, "__version__", "0.99.0")
    _, report, tier = plugin.check_running()
    assert (report.ok, tier.name) == (True, "untested")
    with caplog.at_level(logging.WARNING):
        assert plugin.install(str(tmp_path)) is None
    assert Scheduler.update_from_output.__tokenlens_original__ is ORIGINAL_UPDATE
    warnings = [r.getMessage() for r in caplog.records if "untested vLLM" in r.getMessage()]
    assert len(warnings) == 1 and "0.99.0 was never checked" in warnings[0]


def test_changed_signature_leaves_vllm_untouched(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def make_spec_decoding_stats(self, stats, num_draft_tokens):  # type: ignore[no-untyped-def]
        return None

    monkeypatch.setattr(Scheduler, "make_spec_decoding_stats", make_spec_decoding_stats)
    problem = plugin.install(str(tmp_path))
    assert problem is not None and "\n" not in problem
    assert "Scheduler.make_spec_decoding_stats has parameters ('stats', 'num_draft_tokens')" in (
        problem
    )
    assert Scheduler.update_from_output is ORIGINAL_UPDATE
    assert statuses(tmp_path)[0]["state"] == "refused"


def test_register_logs_one_line_on_refusal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def update_from_output(self, output):  # type: ignore[no-untyped-def]
        return {}

    monkeypatch.setattr(Scheduler, "update_from_output", update_from_output)
    monkeypatch.setenv(TRACE_DIR_ENV, str(tmp_path))
    with caplog.at_level(logging.ERROR):
        plugin.register()
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert errors[0].startswith("tokenlens: tracing disabled, vLLM left untouched: ")
    assert "update_from_output has parameters ('output',)" in errors[0]
    assert Scheduler.make_spec_decoding_stats is ORIGINAL_STATS


def test_later_subclass_with_other_signature_is_refused(tmp_path: Path) -> None:
    """A ``scheduler_cls`` loaded after the plugin, overriding a hooked method badly."""
    assert plugin.install(str(tmp_path)) is None

    class OtherStats(Scheduler):
        def make_spec_decoding_stats(self, stats: Any, counts: Any) -> Any:  # type: ignore[override]
            return stats

    assert Scheduler.update_from_output is ORIGINAL_UPDATE  # everything undone
    assert OtherStats.make_spec_decoding_stats.__qualname__.endswith(
        "OtherStats.make_spec_decoding_stats"
    )
    (status,) = statuses(tmp_path)
    assert status["state"] == "refused"
    assert "OtherStats.make_spec_decoding_stats has parameters" in status["problem"]


def test_subclass_override_without_the_counting_call_is_refused(tmp_path: Path) -> None:
    assert plugin.install(str(tmp_path)) is None

    class Rewritten(Scheduler):
        def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
            return {}

    assert Scheduler.update_from_output is ORIGINAL_UPDATE
    (status,) = statuses(tmp_path)
    assert (
        "neither calls make_spec_decoding_stats nor super().update_from_output"
        in (status["problem"])
    )
