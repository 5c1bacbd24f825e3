"""Helpers shared by tests (importable as ``tests.support``)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
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


REAL_RUN = REPO / "tests" / "data" / "run-dm3"
"""A real traced run (embedded pair, draft model k=3, float32, --cap-tokens 24: two demo
prompts that stop at the length and two one-word answers that stop at the end of turn)
with its capture directory: step files, the worker's request-id map and finished records."""


def copy_run(dest: Path, source: Path = REAL_RUN) -> Path:
    shutil.copytree(source, dest)
    return dest


def cli(argv: list[str]) -> tuple[int, str, str]:
    """The real ``tokenlens.cli.main`` in-process: (exit status, stdout, stderr)."""
    from tokenlens.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse: --help, usage errors
            status = exc.code if isinstance(exc.code, int) else 1
    return status, out.getvalue(), err.getvalue()


def assert_one_line_error(status: int, stderr: str, *needles: str) -> None:
    """Non-zero exit, exactly one line on stderr, no traceback, and every needle in it."""
    assert status != 0, stderr
    assert stderr.count("\n") == 1 and stderr.endswith("\n"), stderr
    assert "Traceback" not in stderr, stderr
    for needle in needles:
        assert needle in stderr, stderr


def process_gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")
