"""analyze counts each output token once and names damage where it finds it (issue 33):
runs that share requests, events duplicated under shifted step numbers, NaN/inf
logprobs, a Japanese prompt labelled `en`, a run that looks complete but whose events
stop short, and `--allow-partial` counting prompts that never started.

Every case starts from the real traced runs in tests/data (and the committed reports).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tests.support import (
    REAL_RUN,
    REPO,
    assert_one_line_error,
    cli,
    copy_run,
    cut_after_first_step,
)
from tokenlens.capture.reconcile import counters_from_events

FAST = ["--quiet", "--bootstrap", "10", "--no-regression"]
DEMO_DM3 = REPO / "reports" / "demo" / "runs" / "draft_model-k3"


def analyze(*args: str | Path) -> tuple[int, str, str]:
    return cli(["analyze", *(str(a) for a in args), *FAST])


def summary_inputs(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "summary.json").read_text("utf-8"))["inputs"]
    return data


def edit_manifest(run: Path, **fields: Any) -> None:
    data = json.loads((run / "manifest.json").read_text("utf-8"))
    (run / "manifest.json").write_text(json.dumps({**data, **fields}), "utf-8")


def write_events(run: Path, events: pa.Table) -> None:
    """New events, with counters recomputed to match (so reconciliation passes)."""
    pq.write_table(events, run / "events.parquet")
    (run / "metrics.json").write_text(json.dumps(counters_from_events(events).to_json()))


# -- each output token counted once ---------------------------------------------------------


def test_the_demo_and_the_full_study_share_requests(tmp_path: Path) -> None:
    """Probe: the demo's n-gram k=3 run with the full study's counted every one of the
    demo's ten requests twice, with no warning."""
    demo, full = REPO / "reports/demo/runs/ngram-k3", REPO / "reports/full/runs/ngram-k3"
    status, _, err = analyze(demo, full, "--out", tmp_path / "out")
    assert_one_line_error(status, err, str(demo), str(full), "share 10 requests", "'demo-01-en'")
    assert not (tmp_path / "out").exists()


def test_keep_longest_keeps_each_shared_request_once(tmp_path: Path) -> None:
    """--overlap keep-longest: a shared request stays where its output is longest; the
    run that lost requests is named in summary.json (here it lost them all)."""
    short = cut_after_first_step(copy_run(tmp_path / "short"))  # every request
    out = tmp_path / "out"
    status, _, err = analyze(REAL_RUN, short, "--out", out, "--overlap", "keep-longest")
    assert status == 0, err
    warnings = summary_inputs(out)["warnings"]
    assert any(str(short) in w and "4 of 4 requests left out" in w for w in warnings), warnings
    assert not any(str(REAL_RUN) in w for w in warnings), warnings


def test_an_output_index_in_two_steps_is_refused(tmp_path: Path) -> None:
    """Probe: one request's events duplicated under shifted step numbers, the counters
    recomputed to match, passed: each of its output tokens counted twice."""
    run = copy_run(tmp_path / "run")
    events = pq.read_table(run / "events.parquet")
    mine = events.filter(pc.equal(events.column("request_id"), "demo-01-ja"))
    shift = pc.max(mine.column("step")).as_py() + 1
    step = mine.schema.get_field_index("step")
    moved = mine.set_column(
        step, mine.schema.field(step), pc.add(mine.column("step"), pa.scalar(shift, pa.int64()))
    )
    write_events(run, pa.concat_tables([events, moved]))
    status, _, err = analyze(run, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "'demo-01-ja'", "appears in two verification steps")


# -- damage named where it is found ---------------------------------------------------------


def test_non_finite_logprobs_are_excluded_and_counted(tmp_path: Path) -> None:
    """Probe: NaN/inf logprobs silently dropped rows from the confidence tables (numpy
    warnings on stderr, nothing in summary.json)."""
    run = copy_run(tmp_path / "run")
    requests = pq.read_table(run / "requests.parquet")
    own = requests.column("token_logprob").to_pylist()
    top = requests.column("top_logprobs").to_pylist()
    own[0][3] = math.nan  # demo-01-ja, token 3
    top[0][5][1] = math.inf  # demo-01-ja, token 5: one of its top-k
    own[1][0] = -math.inf  # demo-01-en, token 0
    for name, values in (("token_logprob", own), ("top_logprobs", top)):
        index = requests.schema.get_field_index(name)
        field = requests.schema.field(index)
        requests = requests.set_column(index, field, pa.array(values, field.type))
    pq.write_table(requests, run / "requests.parquet")
    out = tmp_path / "out"
    status, _, err = cli(["analyze", str(run), "--out", str(out), *FAST])
    assert status == 0, err
    inputs = summary_inputs(out)
    assert inputs["nonfinite_confidence"] == [{"run": str(run), "requests": 2, "tokens": 3}]
    assert any("3 tokens of 2 requests" in w for w in inputs["warnings"]), inputs["warnings"]
    assert "3 tokens of 2 requests" in (out / "FINDINGS.md").read_text("utf-8")


def test_a_japanese_prompt_labelled_en_is_named_and_refused_under_strict(tmp_path: Path) -> None:
    """Probe: a Japanese prompt labelled `en` was counted as English, without a word.
    The demo's run records its prompt token ids (the user message is read from them)."""
    run = copy_run(tmp_path / "run", DEMO_DM3)
    requests = pq.read_table(run / "requests.parquet")
    langs = ["en" if rid == "demo-01-ja" else lang for rid, lang in zip(
        requests.column("request_id").to_pylist(), requests.column("lang").to_pylist(), strict=True
    )]  # fmt: skip
    index = requests.schema.get_field_index("lang")
    requests = requests.set_column(index, requests.schema.field(index), pa.array(langs))
    pq.write_table(requests, run / "requests.parquet")
    out = tmp_path / "out"
    status, _, err = analyze(run, "--out", out)
    assert status == 0, err
    inputs = summary_inputs(out)
    assert inputs["label_contradictions"] == [{"run": str(run), "prompt_ids": ["demo-01-ja"]}]
    assert any("'demo-01-ja'" in w and "language label" in w for w in inputs["warnings"])
    status, _, err = analyze(run, "--out", tmp_path / "strict", "--strict")
    assert_one_line_error(status, err, "'demo-01-ja'", "contradicts their language label")
    status, _, err = analyze(DEMO_DM3, "--out", tmp_path / "whole", "--strict")
    assert status == 0, err  # the labels of the real run hold


def test_a_complete_run_whose_events_stop_short_is_refused(tmp_path: Path) -> None:
    """Probe: a run resumed (by an older tokenlens) from a step file cut mid-line was
    `complete` with one request keeping 9 of its 21 events, noted only in the manifest."""
    run = copy_run(tmp_path / "run")
    gap = "demo-01-en: vLLM's output differs from the step files"
    edit_manifest(
        run, resumed=[{"salvaged_requests": 4, "generated_requests": 0, "salvage_gaps": [gap]}]
    )
    status, _, err = analyze(run, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "not complete", "'demo-01-en'", "--allow-partial")
    out = tmp_path / "allowed"
    status, _, err = analyze(run, "--out", out, "--allow-partial")
    assert status == 0, err
    assert any("'demo-01-en'" in w for w in summary_inputs(out)["warnings"])


def test_allow_partial_counts_the_prompts_that_never_started(tmp_path: Path) -> None:
    """Probe: a run with 1 of 4 prompts finished said `0 of 1 requests unfinished`."""
    run = copy_run(tmp_path / "run")
    for name in ("requests.parquet", "events.parquet"):
        table = pq.read_table(run / name)
        pq.write_table(table.filter(pc.equal(table.column("request_id"), "short-en")), run / name)
    write_events(run, pq.read_table(run / "events.parquet"))
    salvage = {"requests": 1, "finished": 1, "unfinished": [], "events_cut": []}
    edit_manifest(run, status="partial", salvaged_at="2026-12-03T00:00:00+00:00", salvage=salvage)
    status, _, err = analyze(run, "--out", tmp_path / "refused")
    assert_one_line_error(status, err, "3 of 4 requests unfinished", "3 never started")
    out = tmp_path / "out"
    status, _, err = analyze(run, "--out", out, "--allow-partial")
    assert status == 0, err
    assert any("3 of 4 requests unfinished" in w for w in summary_inputs(out)["warnings"])
