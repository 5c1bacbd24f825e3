"""``run_demo``'s own sequencing on the fake engine: the full size's traces, the replay of
both drafters from the draft-model trace, the check of every trace against its replay,
summary.md, wall.json and the last stage.

The demo takes no engine argument, so the test routes its two engine stages to the fake
(tests/support.py): its traces run on the tiny models' names (the embedded pair is never
built) and its replay on the same fake. Everything else is the demo's own code. The
real pair runs the same stages in tests/test_study_vllm.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support import FakeVllm, write_prompts
from tokenlens.demo import DemoConfig, run_demo
from tokenlens.replay import run as replay_module
from tokenlens.rundir import read_run
from tokenlens.trace import TraceConfig, run_trace

PROMPTS: list[dict[str, object]] = [
    {"id": f"{lang}-{i}", "lang": lang, "pair": f"p{i}", "text": f"{word} {i} {word}"}
    for i in range(3)
    for lang, word in (("ja", "東京の夏"), ("en", "summer in Tokyo"))
]


@pytest.fixture
def demo_on_the_fake(
    tiny_cache: Path, fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch
) -> FakeVllm:
    real_replay = replay_module.run_replay

    def trace(config: TraceConfig, progress: Any) -> Path:
        tiny = {"model": "tiny-qwen3", "load_format": "dummy"}
        if config.method == "draft_model":
            tiny["draft_model"] = "tiny-mimo-mtp"
        return run_trace(replace(config, **tiny), progress, start=fake_vllm)  # type: ignore[arg-type]

    monkeypatch.setattr("tokenlens.demo.ensure_pair", lambda *args, **kwargs: None)
    monkeypatch.setattr("tokenlens.demo.run_trace", trace)
    monkeypatch.setattr(
        replay_module,
        "run_replay",
        lambda config, progress: real_replay(config, progress, fake_vllm),
    )
    return fake_vllm


def test_the_full_size_traces_replays_checks_and_analyses(
    tmp_path: Path, tiny_cache: Path, demo_on_the_fake: FakeVllm
) -> None:
    out = tmp_path / "demo"
    prompts = write_prompts(tmp_path / "p.jsonl", PROMPTS)
    config = DemoConfig(
        out=out, size="full", corpus=prompts, bench=False, max_tokens=20, cache=tiny_cache
    )
    result = run_demo(config)
    # Traces under traces/, the analysed (replayed) runs under runs/, k = 1..5 for both.
    assert sorted(p.name for p in result.traces) == ["draft_model-k3", "ngram-k3"]
    assert all(p.parent == out / "traces" for p in result.traces)
    assert sorted(p.name for p in result.runs) == sorted(
        f"{m}-k{k}" for m in ("draft_model", "ngram") for k in range(1, 6)
    )
    assert not any(p.name.endswith(".parquet") for p in (out / "runs").iterdir())
    assert (out / "replay" / "predictions.parquet").is_file()
    # Engines: two traces, the replay's drafter, and the target's look-ahead if needed.
    names = [Path(c.model).name for c in demo_on_the_fake.started]
    assert names[:3] == ["tiny-qwen3", "tiny-qwen3", "tiny-mimo-mtp"] and len(names) <= 4
    # Every trace checked against the replayed run of its method and k.
    checks = json.loads((out / "replay" / "check.json").read_text("utf-8"))
    assert [c["traced"] for c in checks] == ["draft_model-k3", "ngram-k3"]
    for check in checks:
        assert check["equal_judged"] == check["rows_traced"] == check["rows_replayed"] > 0
        assert check["acceptance_traced"] == check["acceptance_replayed"]
    # n-gram drafts are all known; the draft model's too: the full size replays with the
    # drafter's continuation (--branch-drafts), which the rejection kinds read
    assert all(c["equal_rows"] == c["rows_traced"] and c["unknown_drafts"] == 0 for c in checks)
    summary = (out / "summary.md").read_text("utf-8")
    head, _, tail = summary.partition("Real traces (vLLM's counters):")
    assert "| draft_model-k5 |" in head and "| ngram-k3 |" in tail
    assert "Replay against the real traces" in tail
    stages = json.loads((out / "wall.json").read_text("utf-8"))
    assert {"trace draft_model-k3", "trace ngram-k3", "replay", "analysis"} <= set(stages)
    # The last stage read the replayed runs.
    analysed = json.loads((out / "analysis" / "summary.json").read_text("utf-8"))
    assert sorted(r["label"] for r in analysed["runs"]) == sorted(p.name for p in result.runs)
    assert result.note is None and result.index.is_file() and result.findings.is_file()
    assert read_run(result.traces[0]).manifest["status"] == "complete"
