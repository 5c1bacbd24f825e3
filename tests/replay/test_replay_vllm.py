"""Replay equals tracing, on real vLLM: one JA and one EN prompt, 24 tokens, k=3.

Two real traces (draft model and n-gram, k=3) and one replay of both methods from
the draft-model trace, shared by every test here (three engine starts: the two
traces and the replay's drafter; a fourth, the target's look-ahead, only if a step
needs it). ``max_model_len`` 80 puts both requests near it (prompts of 55 and 58
tokens), so vLLM's caps there are part of what must match: fewer drafts in the last
steps, and k zeros where a step would not fit the drafter. One request in flight,
because vLLM applies that check to the longest sequence of the batch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import REPO, write_prompts
from tokenlens.engine.config import SamplingConfig
from tokenlens.replay.compare import compare_runs
from tokenlens.replay.run import ReplayConfig, ReplayResult, run_replay
from tokenlens.rundir import DERIVED_NOTE, read_run
from tokenlens.trace import TraceConfig, run_trace

pytestmark = pytest.mark.vllm

Runs = tuple[dict[str, Path], ReplayResult]
MAX_MODEL_LEN = 80


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, pair: tuple[Path, Path]) -> Runs:
    root = tmp_path_factory.mktemp("replay")
    demo = [json.loads(line) for line in (REPO / "corpora" / "demo.jsonl").read_text().splitlines()]
    chosen = [p for p in demo if p["id"] in ("demo-01-ja", "demo-01-en")]
    prompts = write_prompts(root / "prompts.jsonl", chosen)
    traces = {
        method: run_trace(
            TraceConfig(
                prompts=prompts,
                out=root / method,
                method=method,
                num_spec=3,
                sampling=SamplingConfig(max_tokens=24, logprobs=2),
                concurrency=1,
                dtype="float32",
                max_model_len=MAX_MODEL_LEN,
                allow_capped_output=True,  # the max_model_len edge is the point here
            )
        )
        for method in ("draft_model", "ngram")
    }
    result = run_replay(
        ReplayConfig(
            source=traces["draft_model"],
            out=root / "replay",
            methods=("draft_model", "ngram"),
            ks=(3,),
            branch_drafts=True,
        )
    )
    return traces, result


@pytest.mark.parametrize("method", ["draft_model", "ngram"])
def test_replayed_events_equal_the_traced_ones_row_for_row(runs: Runs, method: str) -> None:
    traces, result = runs
    traced = read_run(traces[method])
    replayed = read_run(result.runs[["draft_model", "ngram"].index(method)])
    agreement = compare_runs(traced, replayed)
    assert agreement.requests == 2 and agreement.rows_traced > 0
    assert agreement.differing == ()
    assert agreement.equal_rows == agreement.rows_traced == agreement.rows_replayed
    assert traced.events is not None
    zeros = [r for r in traced.events.to_pylist() if r["draft_token_id"] == 0]
    assert zeros, "no step near max_model_len: the caps there went untested"


def test_traces_record_the_prompt_token_ids_vllm_prefilled(runs: Runs) -> None:
    traces, _ = runs
    for row in read_run(traces["ngram"]).requests.to_pylist():
        ids = row["prompt_token_ids"]
        assert ids and len(ids) == row["prompt_token_count"]
        assert ids[-3:] == [151644, 77091, 198]  # "<|im_start|>assistant\n": the chat template


def test_replayed_runs_say_what_they_are(runs: Runs) -> None:
    traces, result = runs
    source = read_run(traces["draft_model"])
    for path in result.runs:
        run = read_run(path)
        assert run.manifest["replayed_from"] == source.manifest["signature"]
        assert "replayed:" in run.manifest["signature"]
        assert run.manifest["counters_source"] == "derived"
        assert json.loads((path / "metrics.json").read_text())["source"] == DERIVED_NOTE
        assert run.requests.equals(source.requests)
