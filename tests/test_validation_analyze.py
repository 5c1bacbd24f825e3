"""analyze checks what it is given before any work (issue 16, findings 1-4).

Every case starts from a real traced run (tests/data/run-dm3) and damages one thing the
way a user might: the wrong tokenizer, an edited text, the same run twice, counters
that disagree, a partial run, an --out that is not analyze's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.support import assert_one_line_error, cli, copy_run
from tokenlens.capture.reconcile import counters_from_events

FAST = ["--quiet", "--bootstrap", "10", "--no-regression"]


def analyze(*args: str | Path) -> tuple[int, str, str]:
    return cli(["analyze", *(str(a) for a in args), *FAST])


def edit_manifest(run: Path, **fields: Any) -> None:
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    manifest.update(fields)
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")


def drop_request(run: Path, request_id: str) -> None:
    """Remove one request and its events, so that the copy is a different run."""
    for name in ("requests.parquet", "events.parquet"):
        table = pq.read_table(run / name)
        pq.write_table(
            table.filter(pc.not_equal(table.column("request_id"), request_id)), run / name
        )
    events = pq.read_table(run / "events.parquet")
    (run / "metrics.json").write_text(json.dumps(counters_from_events(events).to_json()))


def summary(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return data


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return copy_run(tmp_path / "run")


def test_a_sound_run_passes_every_check(run: Path, tmp_path: Path) -> None:
    status, _, err = analyze(run, "--out", tmp_path / "out")
    assert status == 0, err
    assert summary(tmp_path / "out")["inputs"]["warnings"] == []


# -- finding 1: token ids against the text and the tokenizer ----------------------------------


def test_wrong_tokenizer_option_is_refused(run: Path, tmp_path: Path) -> None:
    status, _, err = analyze(run, "--tokenizer", "qwen3.5", "--out", tmp_path / "out")
    assert_one_line_error(status, err, "do not decode to output_text", "qwen3.5", "request '")
    assert not (tmp_path / "out" / "tokens.parquet").exists()


def test_relabelled_manifest_tokenizer_is_refused(run: Path, tmp_path: Path) -> None:
    edit_manifest(run, tokenizer="qwen3.5")
    status, _, err = analyze(run, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "do not decode to output_text", "manifest's tokenizer")


def test_runs_with_different_tokenizers_are_not_pooled(run: Path, tmp_path: Path) -> None:
    other = copy_run(tmp_path / "other", run)
    drop_request(other, "demo-01-en")
    edit_manifest(other, tokenizer="qwen3.5")
    status, _, err = analyze(run, other, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "different tokenizers", "--tokenizer")
    # Naming one tokenizer for both is allowed when every run's ids decode under it (the
    # copy shares three requests with the run: each is kept once).
    status, _, err = analyze(
        run, other, "--tokenizer", "qwen2.5", "--overlap", "keep-longest", "--out", tmp_path / "out"
    )
    assert status == 0, err


def test_edited_output_text_is_refused(run: Path, tmp_path: Path) -> None:
    table = pq.read_table(run / "requests.parquet")
    texts = table.column("output_text").to_pylist()
    texts[1] = texts[1].replace("e", "a", 1)
    table = table.set_column(
        table.schema.get_field_index("output_text"), "output_text", pa.array(texts)
    )
    pq.write_table(table, run / "requests.parquet")
    rid = table.column("request_id")[1].as_py()
    status, _, err = analyze(run, "--out", tmp_path / "out")
    assert_one_line_error(status, err, f"request '{rid}'", "do not decode to output_text")


# -- finding 2: the same run twice ------------------------------------------------------------


def test_same_directory_twice_is_refused(run: Path, tmp_path: Path) -> None:
    status, _, err = analyze(run, run, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "given twice")
    status, _, err = analyze(run, tmp_path / "." / "run", "--out", tmp_path / "out")
    assert_one_line_error(status, err, "given twice")


def test_a_copy_of_a_run_is_refused(run: Path, tmp_path: Path) -> None:
    copy = copy_run(tmp_path / "copy", run)
    status, _, err = analyze(run, copy, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "same requests and events and signature", "count twice")


# -- finding 3: failed reconciliation and partial runs ----------------------------------------


def test_unreconciled_run_is_refused_unless_allowed(run: Path, tmp_path: Path) -> None:
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["num_accepted_tokens"] += 1
    (run / "metrics.json").write_text(json.dumps(metrics))
    status, _, err = analyze(run, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "do not match the run's counters", "--allow-unreconciled")
    status, _, err = analyze(run, "--out", tmp_path / "out", "--allow-unreconciled")
    assert status == 0, err
    warnings = summary(tmp_path / "out")["inputs"]["warnings"]
    assert len(warnings) == 1 and "--allow-unreconciled" in warnings[0]
    assert str(run) in warnings[0] and "\n" not in warnings[0]


def test_manifest_that_recorded_a_mismatch_is_refused(run: Path, tmp_path: Path) -> None:
    edit_manifest(run, reconciliation={"exact": False, "differences": ["num_drafts: 1 != 2"]})
    status, _, err = analyze(run, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "num_drafts: 1 != 2")


def test_partial_run_is_refused_unless_allowed(run: Path, tmp_path: Path) -> None:
    edit_manifest(run, status="partial")
    status, _, err = analyze(run, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "partial run", "trace --resume", "--allow-partial")
    status, _, err = analyze(run, "--out", tmp_path / "out", "--allow-partial")
    assert status == 0, err
    warnings = summary(tmp_path / "out")["inputs"]["warnings"]
    assert len(warnings) == 1 and "partial" in warnings[0]


# -- finding 4: --out -------------------------------------------------------------------------


def test_out_with_a_users_files_needs_overwrite(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.html").write_text("my own report")
    status, _, err = analyze(run, "--out", out)
    assert_one_line_error(status, err, "did not write", "report.html", "--overwrite")
    assert (out / "report.html").read_text() == "my own report"
    status, _, err = analyze(run, "--out", out, "--overwrite")
    assert status == 0, err


def test_analyze_writes_again_into_its_own_out(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert analyze(run, "--out", out)[0] == 0
    status, _, err = analyze(run, "--out", out)
    assert status == 0, err


def test_out_that_is_a_file_fails_in_one_line_before_any_work(
    run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tokenlens.analysis.pipeline as analyze_module

    def no_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("analyze started working before checking --out")

    monkeypatch.setattr(analyze_module, "join_parts", no_work)
    target = tmp_path / "summary.json"
    target.write_text("{}")
    status, _, err = analyze(run, "--out", target)
    assert_one_line_error(status, err, "is a file")
    assert target.read_text() == "{}"


def test_out_that_is_the_run_is_refused(run: Path) -> None:
    status, _, err = analyze(run, "--out", run, "--overwrite")
    assert_one_line_error(status, err, "is the run directory")


def test_events_that_contradict_the_outputs_are_refused(run: Path, tmp_path: Path) -> None:
    events = pq.read_table(run / "events.parquet")
    emitted = events.column("emitted_token_id").to_pylist()
    at = next(i for i, v in enumerate(events.column("output_index").to_pylist()) if v is not None)
    emitted[at] += 1
    column = events.schema.get_field_index("emitted_token_id")
    pq.write_table(
        events.set_column(column, "emitted_token_id", pa.array(emitted)), run / "events.parquet"
    )
    status, _, err = analyze(run, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "events.parquet", "differs")


@pytest.mark.parametrize("alpha", ["0", "0.5", "-0.1"])
def test_an_alpha_outside_the_open_interval_is_refused_before_any_work(
    run: Path, tmp_path: Path, alpha: str
) -> None:
    out = tmp_path / "out"
    status, _, err = analyze(run, "--out", out, "--alpha", alpha)
    assert_one_line_error(status, err, "--alpha", "< 0.5")
    assert not out.exists()


def test_alpha_sets_the_decision_level_it_records(run: Path, tmp_path: Path) -> None:
    status, _, err = analyze(run, "--out", tmp_path / "out", "--alpha", "0.025")
    assert status == 0, err
    settings = summary(tmp_path / "out")["settings"]
    assert settings["alpha"] == pytest.approx(0.025)
    assert settings["decision_level"] == pytest.approx(0.95)
