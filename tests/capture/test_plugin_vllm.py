"""The plugin against the real vLLM scheduler class: inert unless asked, loud if unfit."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="the vLLM CPU build is part of the test environment")

from vllm.v1.core.sched.scheduler import Scheduler

from tokenlens.capture import TRACE_DIR_ENV, plugin

ORIGINAL_UPDATE = Scheduler.update_from_output
ORIGINAL_STATS = Scheduler.make_spec_decoding_stats


@pytest.fixture(autouse=True)
def restore() -> None:
    yield
    plugin.uninstall()
    assert Scheduler.update_from_output is ORIGINAL_UPDATE


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
    assert not (tmp_path / "capture").exists()  # files open on the first step only


def test_unknown_vllm_version_leaves_vllm_untouched(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import vllm

    monkeypatch.setenv(TRACE_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(vllm, "__version__", "0.99.0")
    assert plugin.install(str(tmp_path)) == (
        "vLLM 0.99.0 is not supported (supported: ('0.32.0',))"
    )
    plugin.register()
    assert Scheduler.update_from_output is ORIGINAL_UPDATE


def test_changed_signature_leaves_vllm_untouched(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def make_spec_decoding_stats(self, stats, num_draft_tokens):  # type: ignore[no-untyped-def]
        return None

    monkeypatch.setattr(Scheduler, "make_spec_decoding_stats", make_spec_decoding_stats)
    problem = plugin.install(str(tmp_path))
    assert problem is not None and "make_spec_decoding_stats has parameters" in problem
    assert Scheduler.update_from_output is ORIGINAL_UPDATE
