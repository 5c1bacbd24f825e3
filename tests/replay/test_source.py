"""What replay accepts as a source, what it refuses (one line), and the run finaliser."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenlens.capture.events import EVENTS_SCHEMA
from tokenlens.cli import main
from tokenlens.engine.results import GeneratedRequest
from tokenlens.errors import TokenlensError
from tokenlens.replay.source import read_source
from tokenlens.replay.written import replayed_signature
from tokenlens.rundir import (
    DERIVED_NOTE,
    MANIFEST_KEYS,
    RunWriter,
    finalize,
    read_run,
    requests_table,
)

SIGNATURE = "tokenlens:0.1.0|vllm:0.32.0|model:m|draft:d|method:draft_model|k:3|seed:0"


def events(rows: list[tuple[str, int, int, int, bool, int | None, int | None]]) -> pa.Table:
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in EVENTS_SCHEMA.names]
    return pa.table(dict(zip(EVENTS_SCHEMA.names, cols, strict=True)), schema=EVENTS_SCHEMA)


def make_source(path: Path, temperature: float = 0.0, prompt_ids: bool = True) -> Path:
    manifest = {k: "x" for k in MANIFEST_KEYS if k != "status"}
    manifest.update(
        signature=SIGNATURE,
        argv=[],
        speculative={"method": "draft_model", "model": "d", "num_speculative_tokens": 3},
        sampling={"temperature": temperature, "max_tokens": 4},
        dtype="torch.float32",
        max_model_len=64,
    )
    writer = RunWriter(path, manifest)
    req = GeneratedRequest(
        prompt_id="p1",
        vllm_request_id="p1",
        prompt_token_count=3,
        output_token_ids=(10, 11, 12, 13),
        output_text="abcd",
        finish_reason="length",
        prompt_token_ids=(1, 2, 3) if prompt_ids else None,
    )
    # Last step starts at index 2: drafts 12, 13, 14 all accepted; the stop at
    # max_tokens=4 kept two, so 14 is the target's token past the end.
    table = events(
        [
            ("p1", 0, 0, 11, True, 11, 1),
            ("p1", 0, 1, 99, False, 12, 2),
            ("p1", 0, 2, 98, False, None, None),
            ("p1", 1, 0, 13, True, 13, 3),
            ("p1", 1, 1, 14, True, 14, None),
            ("p1", 1, 2, 70, False, 15, None),
        ]
    )
    problems = finalize(
        writer,
        requests_table([req], {"p1": "ja"}, {"p1": None}),
        table,
        None,
        counters_source="derived",
    ).problems
    assert problems == []
    return path


def test_source_unpacks_prompt_ids_and_the_targets_tokens_past_the_end(tmp_path: Path) -> None:
    source = read_source(make_source(tmp_path / "run"))
    (req,) = source.requests
    assert req.prompt_ids == (1, 2, 3) and req.output == (10, 11, 12, 13)
    assert req.lookahead == (14, 15)  # verified by vLLM after the stop, recorded by capture
    assert source.dtype == "float32" and source.max_model_len == 64


def test_run_without_prompt_token_ids_stays_readable_but_cannot_be_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_source(tmp_path / "old")
    table = pq.read_table(path / "requests.parquet").drop_columns(["prompt_token_ids"])
    pq.write_table(table, path / "requests.parquet")  # as written before the column existed
    run = read_run(path)
    assert run.requests.column("prompt_token_ids").null_count == 1
    with pytest.raises(TokenlensError, match=r"no prompt_token_ids .*trace it again"):
        read_source(path)
    assert main(["replay", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "prompt_token_ids" in err


def test_sampled_and_partial_runs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TokenlensError, match="greedy"):
        read_source(make_source(tmp_path / "hot", temperature=0.7))
    path = make_source(tmp_path / "partial")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["status"] = "partial"
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TokenlensError, match="partial"):
        read_source(path)


def test_derived_metrics_say_they_are_not_vllms(tmp_path: Path) -> None:
    path = make_source(tmp_path / "run")
    metrics = json.loads((path / "metrics.json").read_text())
    assert metrics["source"] == DERIVED_NOTE
    assert (metrics["num_drafts"], metrics["num_draft_tokens"]) == (2, 6)
    assert metrics["num_accepted_tokens"] == 3 and metrics["accepted_per_position"] == [2, 1]
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["counters_source"] == "derived" and manifest["status"] == "complete"


def test_replayed_signature_names_the_source_and_never_equals_a_traced_one() -> None:
    sig = replayed_signature(SIGNATURE, "ngram", 5, None)
    assert "method:ngram" in sig and "k:5" in sig and "draft:none" in sig
    assert "replayed:" in sig and sig != SIGNATURE
    assert replayed_signature(SIGNATURE, "draft_model", 3, "d") != SIGNATURE
