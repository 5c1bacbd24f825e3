"""Helpers shared by tests (importable as ``tests.support``)."""

from __future__ import annotations

import json
from pathlib import Path

from tokenlens.capture.reconcile import reconcile
from tokenlens.rundir import Run

REPO = Path(__file__).resolve().parent.parent


def write_prompts(path: Path, prompts: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts), "utf-8")
    return path


def japanese_share(text: str) -> float:
    """Share of kana/kanji among non-space characters."""
    chars = [c for c in text if not c.isspace()]
    ja = [c for c in chars if "\u3040" <= c <= "\u30ff" or "\u4e00" <= c <= "\u9fff"]
    return len(ja) / max(1, len(chars))


def ascii_share(text: str) -> float:
    chars = [c for c in text if not c.isspace()]
    return sum(c.isascii() for c in chars) / max(1, len(chars))


def check_events(run: Run) -> None:
    """The contract's invariant against vLLM's counters, and the token identities."""
    assert run.events is not None
    assert reconcile(run.events, run.metrics) == []
    outputs = {r["request_id"]: r["output_token_ids"] for r in run.requests.to_pylist()}
    judged = 0
    for ev in run.events.to_pylist():
        assert ev["request_id"] in outputs
        if ev["accepted"]:
            assert ev["emitted_token_id"] == ev["draft_token_id"]
        if ev["output_index"] is not None:
            assert outputs[ev["request_id"]][ev["output_index"]] == ev["emitted_token_id"]
            judged += 1
    assert judged > 0
