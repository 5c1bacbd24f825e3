"""analyze is never silently wrong (issue 25): the same data in another row order is
still the same data, runs of two targets are two studies, a file from a newer
tokenlens is refused, and one language gives `insufficient_data`.

Every case starts from the real traced runs in tests/data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.support import REAL_RUN, REPO, assert_one_line_error, cli, copy_run
from tokenlens.capture.reconcile import counters_from_events
from tokenlens.errors import TokenlensError

FAST = ["--quiet", "--bootstrap", "10", "--no-regression"]
NGRAM = REPO / "tests" / "data" / "run-ngram"
EVENT_ORDER = [("request_id", "ascending"), ("step", "ascending"), ("position", "ascending")]


def analyze(*args: str | Path) -> tuple[int, str, str]:
    return cli(["analyze", *(str(a) for a in args), *FAST])


def manifest(run: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    return data


def edit_manifest(run: Path, **fields: Any) -> None:
    (run / "manifest.json").write_text(json.dumps({**manifest(run), **fields}), "utf-8")


def reversed_rows(run: Path) -> None:
    """The same requests and events, every row in the opposite order."""
    for name in ("requests.parquet", "events.parquet"):
        table = pq.read_table(run / name)
        pq.write_table(table.take(pa.array(range(table.num_rows - 1, -1, -1))), run / name)


def strict_json(path: Path) -> Any:
    """Parse as JSON allows it: NaN and Infinity are not JSON."""

    def refuse(token: str) -> None:
        raise ValueError(f"{path}: {token} is not valid JSON")

    return json.loads(path.read_text("utf-8"), parse_constant=refuse)


# -- content identity, whatever the row order ----------------------------------------------


def test_a_reordered_copy_is_refused(tmp_path: Path) -> None:
    """Probe: a copy in another row order (a resumed copy) passed and doubled n."""
    copy = copy_run(tmp_path / "copy")
    reversed_rows(copy)
    status, _, err = analyze(REAL_RUN, copy, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "same requests and events", "count twice")
    assert not (tmp_path / "out").exists()


def test_a_replay_equal_to_its_trace_is_refused(tmp_path: Path) -> None:
    """Probe: a replay at the trace's own method and k passed and doubled n.

    A replay leaves -1 where the trace knew a draft after the first rejection (never
    judged); its rows are otherwise the trace's (docs/replay.md), in its own order.
    """
    replay = copy_run(tmp_path / "replay", NGRAM)
    events = pq.read_table(replay / "events.parquet")
    judged = pc.is_valid(events.column("emitted_token_id"))
    draft = pc.if_else(judged, events.column("draft_token_id"), pa.scalar(-1, pa.int64()))
    column = events.schema.get_field_index("draft_token_id")
    events = events.set_column(column, "draft_token_id", draft)
    assert pc.sum(pc.equal(draft, -1)).as_py() > 0  # the test means something
    pq.write_table(events.sort_by([("request_id", "descending")]), replay / "events.parquet")
    source = manifest(NGRAM)["signature"]
    edit_manifest(replay, replayed_from=source, signature=source + "|replayed:0123abcd")
    status, _, err = analyze(NGRAM, replay, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "same requests and events", "a replay of the other")


def test_two_independent_identical_traces_are_refused_in_any_order(tmp_path: Path) -> None:
    """The same check for rows in the same order and in another: it was inconsistent."""
    same = copy_run(tmp_path / "same")
    edit_manifest(same, created_at="2027-01-01T00:00:00+00:00")  # traced again, same result
    status, _, err = analyze(REAL_RUN, same, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "same requests and events and signature")
    reversed_rows(same)
    status, _, err = analyze(same, REAL_RUN, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "same requests and events and signature")


def test_runs_that_differ_in_one_request_are_two_runs(tmp_path: Path) -> None:
    """The identity is not too coarse: a run without one request is another run."""
    other = copy_run(tmp_path / "other")
    for name in ("requests.parquet", "events.parquet"):
        table = pq.read_table(other / name)
        keep = pc.not_equal(table.column("request_id"), "short-en")
        pq.write_table(table.filter(keep), other / name)
    events = pq.read_table(other / "events.parquet")
    (other / "metrics.json").write_text(json.dumps(counters_from_events(events).to_json()))
    status, _, err = analyze(REAL_RUN, other, "--out", tmp_path / "out")
    # Not one run given twice; but the three requests both hold would count twice (issue 33).
    assert_one_line_error(status, err, "share 3 requests", "--overlap keep-longest")
    assert "same requests and events" not in err
    status, _, err = analyze(
        REAL_RUN, other, "--out", tmp_path / "out", "--overlap", "keep-longest"
    )
    assert status == 0, err


# -- what may not be pooled ------------------------------------------------------------------


@pytest.fixture
def other_target(tmp_path: Path) -> Path:
    """The n-gram run, relabelled as a trace of another target model."""
    run = copy_run(tmp_path / "ngram-other", NGRAM)
    old = manifest(run)
    edit_manifest(
        run,
        model="qwen2.5-coder-7b-instruct",
        signature=old["signature"].replace(old["model"], "qwen2.5-coder-7b-instruct"),
    )
    return run


def test_runs_of_different_targets_are_refused_naming_both(
    other_target: Path, tmp_path: Path
) -> None:
    """Probe: they were pooled into one group; the only trace was `model:A+B`."""
    status, _, err = analyze(REAL_RUN, other_target, "--out", tmp_path / "out")
    assert_one_line_error(
        status,
        err,
        "target model",
        "qwen2.5-coder-1.5b-instruct@cc324af070c2",
        "qwen2.5-coder-7b-instruct",
        "--compare model",
    )
    assert not (tmp_path / "out").exists()


def test_compare_keeps_targets_apart_and_labels_them(other_target: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    status, stdout, err = analyze(REAL_RUN, other_target, "--out", out, "--compare", "model")
    assert status == 0, err
    compare = strict_json(out / "compare.json")
    assert compare["format_version"] == "1.0" and compare["compared"] == ["model"]
    groups = {g["values"]["model"]: g for g in compare["groups"]}
    assert set(groups) == {"qwen2.5-coder-1.5b-instruct@cc324af070c2", "qwen2.5-coder-7b-instruct"}
    for model, group in groups.items():
        summary = strict_json(out / group["summary"])
        assert [Path(r["path"]).name for r in summary["inputs"]["runs"]] == [
            Path(p).name for p in group["runs"]
        ]
        assert f"model:{model}|" in summary["signature"]  # one target each, no "A+B"
        assert group["label"] in stdout
    rerun, _, err = analyze(REAL_RUN, other_target, "--out", out, "--compare", "model")
    assert rerun == 0, err  # analyze's own output directory: written again


def test_greedy_and_sampled_runs_are_not_pooled(tmp_path: Path) -> None:
    sampled = copy_run(tmp_path / "sampled", NGRAM)
    edit_manifest(sampled, sampling={**manifest(NGRAM)["sampling"], "temperature": 0.7})
    status, _, err = analyze(REAL_RUN, sampled, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "decoding", "greedy", "t0.7", "--compare decoding")


def test_dummy_weights_are_not_pooled_with_real_ones(tmp_path: Path) -> None:
    dummy = copy_run(tmp_path / "dummy", NGRAM)
    edit_manifest(dummy, load_format="dummy")
    status, _, err = analyze(REAL_RUN, dummy, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "weights", "auto", "dummy")


def with_prompt_ids(run: Path, changed: str | None = None, drop: str | None = None) -> Path:
    """Give ``run`` recorded prompt token ids (one per prompt; ``changed`` gets others)."""
    requests = pq.read_table(run / "requests.parquet")
    if drop is not None:
        requests = requests.filter(pc.not_equal(requests.column("request_id"), drop))
        events = pq.read_table(run / "events.parquet")
        events = events.filter(pc.not_equal(events.column("request_id"), drop))
        pq.write_table(events, run / "events.parquet")
        (run / "metrics.json").write_text(json.dumps(counters_from_events(events).to_json()))
    ids = [
        [7, len(pid), *pid.encode()] + ([9] if pid == changed else [])
        for pid in requests.column("prompt_id").to_pylist()
    ]
    requests = requests.append_column("prompt_token_ids", pa.array(ids, pa.list_(pa.int64())))
    pq.write_table(requests, run / "requests.parquet")
    return run


def test_one_prompt_id_must_name_one_prompt(tmp_path: Path) -> None:
    first = with_prompt_ids(copy_run(tmp_path / "first"))
    same = with_prompt_ids(copy_run(tmp_path / "same"), drop="short-en")
    # The same prompts under the same ids: pooled (each shared request once, issue 33).
    status, _, err = analyze(first, same, "--out", tmp_path / "out", "--overlap", "keep-longest")
    assert status == 0, err
    other = with_prompt_ids(copy_run(tmp_path / "other"), changed="demo-01-ja", drop="short-en")
    status, _, err = analyze(first, other, "--out", tmp_path / "out2")
    assert_one_line_error(status, err, "'demo-01-ja' is a different prompt", "token ids differ")


def test_compare_names_only_pooling_fields() -> None:
    from tokenlens.analysis.inputs import POOLING_FIELDS
    from tokenlens.cli.analyze import COMPARE_FIELDS

    assert tuple(POOLING_FIELDS) == COMPARE_FIELDS


# -- format versions ----------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2.0", "10.3"])
def test_a_run_from_a_newer_major_is_refused(tmp_path: Path, version: str) -> None:
    """Probe: a run directory from a newer tokenlens was read without a word."""
    run = copy_run(tmp_path / "run")
    edit_manifest(run, format_version=version)
    status, _, err = analyze(run, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "newer tokenlens", f"format {version}", "upgrade")


@pytest.mark.parametrize("version", [None, "1.0", "1.9"])
def test_older_versions_and_newer_minors_are_read(tmp_path: Path, version: str | None) -> None:
    run = copy_run(tmp_path / "run")
    data = manifest(run)
    data.pop("format_version", None)
    if version is not None:
        data["format_version"] = version
    (run / "manifest.json").write_text(json.dumps(data), "utf-8")
    status, _, err = analyze(run, "--out", tmp_path / "out")
    assert status == 0, err
    assert strict_json(tmp_path / "out" / "summary.json")["format_version"] == "1.0"


def test_a_malformed_version_is_one_line(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "run")
    edit_manifest(run, format_version="two")
    status, _, err = analyze(run, "--out", tmp_path / "out")
    assert_one_line_error(status, err, "format_version 'two'", "MAJOR.MINOR")


def test_resume_refuses_a_run_from_a_newer_major(tmp_path: Path) -> None:
    run = copy_run(tmp_path / "run")
    edit_manifest(run, status="partial", format_version="2.0")
    status, _, err = cli(["trace", "--resume", str(run)])
    assert_one_line_error(status, err, "newer tokenlens")


def test_a_summary_from_a_newer_major_is_refused(tmp_path: Path) -> None:
    from tokenlens.analysis.summary_file import load_summary

    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"format_version": "2.0", "hypotheses": {}}), "utf-8")
    with pytest.raises(TokenlensError, match="newer tokenlens"):
        load_summary(path)
    path.write_text(json.dumps({"hypotheses": {}}), "utf-8")  # before versions: read
    load_summary(path)


def test_a_bench_from_a_newer_major_is_not_resumed(tmp_path: Path) -> None:
    from tests.support import write_plan
    from tokenlens.bench.config import BenchConfig
    from tokenlens.bench.output import BenchOutput
    from tokenlens.bench.plan import load_plan
    from tokenlens.progress import SILENT

    plan = load_plan(write_plan(tmp_path))
    out = tmp_path / "bench"
    bench = BenchOutput(BenchConfig(plan=plan.path, out=out), plan, SILENT)
    bench.prepare("0.32.0")
    info = json.loads((out / "bench.json").read_text("utf-8"))
    assert info["format_version"] == "1.0"
    (out / "bench.json").write_text(json.dumps({**info, "format_version": "2.0"}), "utf-8")
    again = BenchOutput(BenchConfig(plan=plan.path, out=out), plan, SILENT)
    with pytest.raises(TokenlensError, match="newer tokenlens"):
        again.prepare("0.32.0")


def test_every_writer_stamps_its_version(tmp_path: Path) -> None:
    from tokenlens.rundir import RunWriter, read_run

    fields = {k: v for k, v in manifest(REAL_RUN).items() if k != "format_version"}
    writer = RunWriter(tmp_path / "run", fields)
    writer.complete()
    assert manifest(tmp_path / "run")["format_version"] == "1.0"
    with pytest.raises(TokenlensError):
        read_run(tmp_path / "run")  # no requests: the reader, not the stamp, refuses
    corpus = str(REPO / "corpora" / "smoke.jsonl")
    status, _, err = cli(
        ["tokens", "--corpus", corpus, "--tokenizer", "qwen2.5", "--out", str(tmp_path / "tok")]
    )
    assert status == 0, err
    assert strict_json(tmp_path / "tok" / "summary.json")["format_version"] == "1.0"


# -- verdicts and options --------------------------------------------------------------------


def test_one_language_gives_insufficient_data(tmp_path: Path) -> None:
    """Probe: with one language missing the verdicts said `inconclusive`."""
    run = copy_run(tmp_path / "ja-only")
    requests = pq.read_table(run / "requests.parquet")
    ja = requests.filter(pc.equal(requests.column("lang"), "ja"))
    pq.write_table(ja, run / "requests.parquet")
    events = pq.read_table(run / "events.parquet")
    events = events.filter(pc.is_in(events.column("request_id"), ja.column("request_id")))
    pq.write_table(events, run / "events.parquet")
    (run / "metrics.json").write_text(json.dumps(counters_from_events(events).to_json()))
    status, stdout, err = analyze(run, "--out", tmp_path / "out")
    assert status == 0, err
    hypotheses = strict_json(tmp_path / "out" / "summary.json")["hypotheses"]
    assert {h["verdict"] for h in hypotheses.values()} == {"insufficient_data"}
    assert "H1: insufficient_data" in stdout


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--draft-cost", "-1"),  # probe: divided by zero
        ("--threshold", "nan"),  # probe: written into summary.json as NaN
        ("--threshold", "inf"),
        ("--alpha", "nan"),
        ("--seed", "-1"),
        ("--bootstrap", "5"),
    ],
)
def test_bad_numbers_are_refused_at_parse_time(tmp_path: Path, option: str, value: str) -> None:
    status, _, err = analyze(REAL_RUN, "--out", tmp_path / "out", option, value)
    assert_one_line_error(status, err, f"argument {option}:", repr(value))
    assert not (tmp_path / "out").exists()


def test_summary_json_is_strict_json(tmp_path: Path) -> None:
    status, _, err = analyze(REAL_RUN, "--out", tmp_path / "out", "--draft-cost", "0")
    assert status == 0, err
    strict_json(tmp_path / "out" / "summary.json")
