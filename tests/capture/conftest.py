"""A real vLLM scheduler without a model: the fixtures of the scheduler-level tests.

The harness itself lives in :mod:`tokenlens.testing.scheduler` (the hook benchmark drives
the same one); here it is made per test, with the tokenlens hook installed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tokenlens.testing.scheduler import Harness, make_scheduler, tiny_vllm_config


@pytest.fixture(scope="session")
def vllm_config(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One ``VllmConfig`` (n-gram k=3, prefix caching, per-request metrics ``detailed``)."""
    pytest.importorskip("vllm", reason="the vLLM CPU build is part of the test environment")
    return tiny_vllm_config(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture
def harness(vllm_config: Any, tmp_path: Path) -> Iterator[Callable[..., Harness]]:
    """``harness(async_=False, num_blocks=200)``: a fresh scheduler with the hook installed."""
    from tokenlens.capture import plugin

    made: list[Harness] = []

    def make(async_: bool = False, num_blocks: int = 200) -> Harness:
        assert not made, "one scheduler per test (the hook records into one directory)"
        trace_dir = tmp_path / "capture"
        assert plugin.install(str(trace_dir)) is None
        made.append(Harness(make_scheduler(vllm_config, num_blocks, async_), trace_dir))
        return made[-1]

    yield make
    plugin.uninstall()
