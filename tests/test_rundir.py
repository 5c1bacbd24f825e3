"""Run directories: the writer's partial->complete protocol and the reader's errors."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tokenlens.engine.results import GeneratedRequest, SpecCounters, TokenLogprobs
from tokenlens.errors import TokenlensError
from tokenlens.rundir import MANIFEST_KEYS, RunWriter, read_run, requests_table

MANIFEST: dict[str, object] = {k: "x" for k in MANIFEST_KEYS if k != "status"} | {
    "argv": [],
    "speculative": {},
}


def make_run(path: Path) -> RunWriter:
    writer = RunWriter(path, dict(MANIFEST))
    req = GeneratedRequest(
        prompt_id="p1",
        vllm_request_id="p1",
        prompt_token_count=5,
        output_token_ids=(1, 2, 3),
        output_text="abc",
        finish_reason="stop",
        logprobs=tuple(TokenLogprobs(-0.1, 1, (t, 9), (-0.1, -2.5)) for t in (1, 2, 3)),
    )
    writer.write_requests(requests_table([req], {"p1": "ja"}, {"p1": "pair1"}))
    writer.write_metrics(SpecCounters(2, 6, 3, (2, 1, 0)))
    return writer


def test_partial_until_complete(tmp_path: Path) -> None:
    writer = make_run(tmp_path / "run")
    run = read_run(tmp_path / "run")
    assert run.manifest["status"] == "partial" and not run.complete
    writer.complete()
    run = read_run(tmp_path / "run")
    assert run.complete
    assert run.metrics == SpecCounters(2, 6, 3, (2, 1, 0))
    row = run.requests.to_pylist()[0]
    assert row["lang"] == "ja" and row["pair"] == "pair1" and row["output_token_ids"] == [1, 2, 3]
    assert row["top_ids"][0] == [1, 9] and row["token_logprob"] == [-0.1, -0.1, -0.1]
    assert run.events is None


def test_refuses_to_overwrite_without_permission(tmp_path: Path) -> None:
    make_run(tmp_path / "run")
    with pytest.raises(TokenlensError, match="already holds a run"):
        RunWriter(tmp_path / "run", dict(MANIFEST))
    RunWriter(tmp_path / "run", dict(MANIFEST), overwrite=True)


def test_reader_errors_are_one_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with pytest.raises(TokenlensError, match="run directory not found"):
        read_run(run)
    make_run(run)
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["signature"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(TokenlensError, match="missing key 'signature'"):
        read_run(run)
    make_run(tmp_path / "run2")
    (tmp_path / "run2" / "metrics.json").write_text("{not json")
    with pytest.raises(TokenlensError, match="malformed JSON"):
        read_run(tmp_path / "run2")
    make_run(tmp_path / "run3")
    table = pq.read_table(tmp_path / "run3" / "requests.parquet").drop_columns(["lang"])
    pq.write_table(table, tmp_path / "run3" / "requests.parquet")
    with pytest.raises(TokenlensError, match="missing column 'lang'"):
        read_run(tmp_path / "run3")
    make_run(tmp_path / "run4")
    bad = pa.table({"request_id": ["p1"], "step": ["zero"]})
    pq.write_table(bad, tmp_path / "run4" / "events.parquet")
    with pytest.raises(TokenlensError, match=r"events\.parquet"):
        read_run(tmp_path / "run4")


def test_counter_difference() -> None:
    after = SpecCounters(5, 15, 9, (5, 3, 1))
    before = SpecCounters(2, 6, 3, (2, 1))
    assert after - before == SpecCounters(3, 9, 6, (3, 2, 1))
    assert (after - before).acceptance_rate == pytest.approx(6 / 9)
    assert (after - before).mean_acceptance_length == pytest.approx(1 + 6 / 3)
    assert SpecCounters().acceptance_rate is None


class _Bytes:
    """A vocabulary reduced to what output_mismatch reads: bytes per id, no specials."""

    def __init__(self, pieces: list[bytes]) -> None:
        self._pieces = pieces
        self.size = len(pieces)

    def is_special(self, ids: list[int]) -> list[bool]:
        return [False for _ in ids]

    def pieces(self, ids: list[int]) -> list[bytes]:
        return [self._pieces[i] for i in ids]


def test_output_mismatch_tolerates_held_back_tokens() -> None:
    """vLLM's detokenizer holds back whole tokens after the last whole character.

    Found on a 128-token trace of the full demo: the last token completed one character
    and started the next, and output_text lacked both, not only the cut one.
    """
    from tokenlens.text.detokenize import output_mismatch

    no = "の".encode()
    ja = "日".encode()  # 3 bytes: the last token carries its first byte
    vocab = _Bytes([b"ab", no[:2], no[2:] + ja[:1], ja[1:]])
    assert output_mismatch(vocab, [0, 1, 2], "ab") is None  # held back with its token
    assert output_mismatch(vocab, [0, 1, 2], "abの") is None  # only the cut byte dropped
    assert output_mismatch(vocab, [0, 1, 2, 3], "abの日") is None
    assert output_mismatch(vocab, [0, 1, 2, 3], "ab") is not None  # whole text: no hold
    assert output_mismatch(vocab, [0, 1, 2], "a") is not None
