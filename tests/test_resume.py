"""`trace --resume` without an engine: what it keeps, and when it refuses.

The real run (tests/data/run-dm3) is turned into what a killed trace leaves: a
``partial`` manifest and ``capture/`` only. With every request recorded as finished,
resume completes the run from the records alone (no engine) and must reproduce the
original run's requests, events and counters; with a request missing and a changed
prompt file, it must refuse before generating anything and leave a salvaged partial run.
(The resume that generates, after a real kill -9, is in tests/test_resume_vllm.py.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support import REAL_RUN, REPO, check_events, copy_run, needs
from tokenlens.capture.events import EVENTS_SCHEMA
from tokenlens.errors import TokenlensError
from tokenlens.rundir import read_run
from tokenlens.trace import resume_trace

PROMPTS = REPO / "tests" / "data" / "run-dm3.prompts.jsonl"


def killed_copy(tmp_path: Path) -> Path:
    """The real run as a kill -9 of its trace leaves it (with its prompt file beside it)."""
    run = copy_run(tmp_path / "run")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_bytes(PROMPTS.read_bytes())
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["status"] = "partial"
    manifest["trace_config"]["prompts"] = str(prompts)
    for key in ("finished_at", "reconciliation", "timing"):
        manifest.pop(key)
    (run / "manifest.json").write_text(json.dumps(manifest))
    for name in ("requests.parquet", "events.parquet", "metrics.json"):
        (run / name).unlink()
    return run


def test_resume_with_every_request_finished_needs_no_engine(tmp_path: Path) -> None:
    run = killed_copy(tmp_path)
    resume_trace(run)
    resumed, original = read_run(run), read_run(REAL_RUN)
    assert resumed.manifest["status"] == "complete"
    assert resumed.manifest["resumed"][-1]["generated_requests"] == 0
    assert resumed.requests.select(["request_id", "output_token_ids", "output_text"]).equals(
        original.requests.select(["request_id", "output_token_ids", "output_text"])
    )
    # The committed run predates the per-step k column (null-filled when read).
    columns = EVENTS_SCHEMA.names
    assert (
        resumed.events.select(columns)
        .sort_by("request_id")
        .equals(original.events.select(columns).sort_by("request_id"))
    )
    assert resumed.metrics == original.metrics  # counted from the step files = vLLM's
    check_events(resumed)


@needs("vllm")
def test_resume_refuses_a_changed_prompt_file_and_keeps_the_salvage(tmp_path: Path) -> None:
    run = killed_copy(tmp_path)
    finished = next((run / "capture").glob("finished-*.jsonl"))
    lines = finished.read_text().splitlines(keepends=True)
    finished.write_text("".join(line for line in lines if '"short-en"' not in line))
    prompts = Path(json.loads((run / "manifest.json").read_text())["trace_config"]["prompts"])
    prompts.write_text(prompts.read_text().replace("one word", "one word only"))
    with pytest.raises(TokenlensError, match=r"signature no longer matches.*corpus"):
        resume_trace(run)
    salvaged = read_run(run)
    assert salvaged.manifest["status"] == "partial"
    reasons = {r["request_id"]: r["finish_reason"] for r in salvaged.requests.to_pylist()}
    assert reasons["short-en"] == "stop"  # implied by its step files: it ended on <|im_end|>
    assert not (run / "capture" / "resume-1").exists()
    assert pq.read_table(run / "events.parquet").num_rows == salvaged.metrics.num_draft_tokens


def test_an_old_manifest_that_names_k_num_spec_resumes_with_its_k(tmp_path: Path) -> None:
    """Manifests written before the rename say ``num_spec``; resume must not fall back to
    the default k (3) silently, so a committed k = 3 run and a rewritten k = 5 copy are
    both read back with their own k."""
    from tokenlens.trace import config_from_json

    data = json.loads((REPO / "tests/data/run-dm3/manifest.json").read_text("utf-8"))
    old = data["trace_config"]
    assert "num_spec" in old and "k" not in old
    assert config_from_json(old, tmp_path).k == 3
    assert config_from_json({**old, "num_spec": 5}, tmp_path).k == 5
