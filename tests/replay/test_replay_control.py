"""Replay's control flow on a fake engine: which engines start, and that the replayed
runs equal traces of the same toy models, row for row.

The fake (tests/support.py) generates, drafts and scores with one toy target and one
toy drafter, so a trace made with it and a replay computed from its passes must agree
exactly, for every method and k, when replay orders its passes and steps right. The
real pair's agreement is proven in tests/test_study_vllm.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support import FakeVllm, RecordingProgress, write_prompts
from tokenlens.engine.config import SamplingConfig
from tokenlens.errors import TokenlensError
from tokenlens.replay.compare import compare_runs
from tokenlens.replay.run import ReplayConfig, run_replay
from tokenlens.rundir import DERIVED_NOTE, read_run
from tokenlens.trace import TraceConfig, run_trace

PROMPTS: list[dict[str, object]] = [
    {"id": f"{lang}-{i}", "lang": lang, "pair": f"p{i}", "text": f"{word} {i} {word}"}
    for i in range(4)
    for lang, word in (("ja", "京都の秋"), ("en", "autumn in Kyoto"))
]


def trace(tmp: Path, cache: Path, method: str, k: int) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    return run_trace(
        TraceConfig(
            prompts=write_prompts(tmp / "p.jsonl", PROMPTS),
            out=tmp / f"{method}-k{k}",
            model="tiny-qwen3",
            draft_model="tiny-mimo-mtp" if method == "draft_model" else None,
            method=method,
            k=k,
            load_format="dummy",
            cache=cache,
            sampling=SamplingConfig(max_tokens=24, logprobs=1),
        ),
        start=FakeVllm(),
    )


@pytest.fixture
def source(tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm) -> Path:
    """A draft-model k=1 trace: its events show little past the outputs' ends, so that
    replaying k=3 needs the target's look-ahead."""
    return trace(tmp_path / "traces", tiny_cache, "draft_model", 1)


def test_replayed_runs_equal_traces_for_both_drafters_and_every_k(
    tmp_path: Path, tiny_cache: Path, source: Path, fake_vllm: FakeVllm
) -> None:
    progress = RecordingProgress()
    config = ReplayConfig(
        source=source,
        out=tmp_path / "replay",
        methods=("draft_model", "ngram"),
        ks=(1, 3),
        branch_drafts=True,
        cache=tiny_cache,
    )
    result = run_replay(config, progress, start=fake_vllm)
    # The drafter's engine once (the n-gram kernel runs in it too); the target's only
    # for the look-ahead past the outputs' ends.
    names = [Path(c.model).name for c in fake_vllm.started]
    lookahead = result.info["lookahead"]["requests"]
    assert names == ["tiny-mimo-mtp"] + ["tiny-qwen3"] * (lookahead > 0)
    assert lookahead > 0, "no step reached past an output's end: the look-ahead went untested"
    assert result.info["drafter"]["branch_requests"] > 0
    stages = ["drafter pass", "branch pass", "look-ahead pass"][: 2 + (lookahead > 0)]
    assert [name for name, _ in progress.stages] == stages
    assert [p.name for p in result.runs] == [
        "draft_model-k1", "draft_model-k3", "ngram-k1", "ngram-k3"
    ]  # fmt: skip
    for path in result.runs:
        method, k = path.name.rsplit("-k", 1)
        traced = read_run(trace(tmp_path / "check", tiny_cache, method, int(k)))
        replayed = read_run(path)
        agreement = compare_runs(traced, replayed)
        assert agreement.differing == (), path.name
        assert agreement.equal_rows == agreement.rows_traced == agreement.rows_replayed > 0
        assert replayed.manifest["counters_source"] == "derived"
        assert json.loads((path / "metrics.json").read_text())["source"] == DERIVED_NOTE
        # Derived counters == the engine's (a position nobody accepted at counts 0 either way).
        assert replayed.metrics.padded(int(k)) == traced.metrics.padded(int(k))
        assert replayed.requests.equals(read_run(source).requests)


def test_without_branch_drafts_the_unjudged_drafts_are_unknown(
    tmp_path: Path, tiny_cache: Path, source: Path, fake_vllm: FakeVllm
) -> None:
    config = ReplayConfig(
        source=source, out=tmp_path / "replay", methods=("draft_model",), ks=(3,),
        cache=tiny_cache,
    )  # fmt: skip
    result = run_replay(config, start=fake_vllm)
    assert "branch_requests" not in result.info["drafter"]
    replayed = read_run(result.runs[0])
    traced = read_run(trace(tmp_path / "check", tiny_cache, "draft_model", 3))
    assert replayed.events is not None and traced.events is not None
    rows = replayed.events.to_pylist()
    unknown = [r for r in rows if r["draft_token_id"] == -1]
    assert unknown and all(not r["accepted"] and r["emitted_token_id"] is None for r in unknown)
    assert replayed.metrics == traced.metrics  # never judged: the counts are unchanged
    agreement = compare_runs(traced, replayed)
    assert agreement.rows_traced == agreement.rows_replayed
    assert agreement.equal_rows == agreement.rows_traced - len(unknown)
    # Replaying again into the same directory refuses, unless asked to overwrite.
    with pytest.raises(TokenlensError, match="already holds a run"):
        run_replay(config, start=fake_vllm)
    run_replay(replace(config, overwrite=True), start=fake_vllm)
