"""Inputs are validated before the engine starts, and bad ones fail in one line (issue 16).

Findings 5 (--cap-tokens), 6 (the engine dies with its parent, without vLLM: the
worker's guard on a stand-in process tree), 7 (tracebacks on bad text), 8 (prompt
length before the engine start) and 9 (language tags, empty content, --quiet, '#' in
ids, finish reasons of salvaged requests, the committed sample runs).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support import (
    REAL_RUN,
    REPO,
    assert_one_line_error,
    cli,
    copy_run,
    needs,
    process_gone,
    write_prompts,
)
from tokenlens.engine.config import SamplingConfig
from tokenlens.errors import TokenlensError
from tokenlens.prompts import read_prompts

JA = {"id": "a", "lang": "ja", "text": "日本の四季について説明してください。"}
EN = {"id": "b", "lang": "en", "text": "Describe the four seasons in Japan."}


# -- finding 5: --cap-tokens only lowers the length, and the signature says what was sent ----


def test_cap_tokens_never_raises_the_length(tmp_path: Path) -> None:
    from tokenlens.trace import TraceConfig, manifest_for, select_prompts, trace_jobs

    path = write_prompts(tmp_path / "p.jsonl", [JA, {**EN, "max_tokens": 80}])
    prompts = select_prompts(read_prompts(path), None, None)
    config = TraceConfig(
        prompts=path, out=tmp_path / "run", sampling=SamplingConfig(max_tokens=10), cap_tokens=24
    )
    sent = {job.prompt_id: job.max_tokens for job in trace_jobs(config, prompts)}
    assert sent == {"a": 10, "b": 24}
    assert "sampling:greedy,max24" in manifest_for(config, prompts, "0.32.0")["signature"]


def test_signature_names_a_prompts_own_longer_length(tmp_path: Path) -> None:
    from tokenlens.trace import TraceConfig, manifest_for, select_prompts, trace_jobs

    path = write_prompts(tmp_path / "p.jsonl", [JA, {**EN, "max_tokens": 80}])
    prompts = select_prompts(read_prompts(path), None, None)
    config = TraceConfig(prompts=path, out=tmp_path / "run", sampling=SamplingConfig(max_tokens=24))
    sent = {job.prompt_id: job.max_tokens for job in trace_jobs(config, prompts)}
    assert sent == {"a": 24, "b": 80}
    assert "sampling:greedy,max80" in manifest_for(config, prompts, "0.32.0")["signature"]


# -- finding 6 without vLLM: the worker's guard ends its whole process group ------------------

PARENT = """\
import subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], start_new_session=True)
time.sleep(600)
"""
WORKER = """\
import os, subprocess, sys, time
from tokenlens.engine.worker import die_with_parent
die_with_parent(os.getppid())
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(sys.argv[1], "w") as fh:
    fh.write(f"{os.getpid()} {child.pid}")
time.sleep(600)
"""


def test_worker_and_its_children_die_with_the_parent(tmp_path: Path) -> None:
    pids_file = tmp_path / "pids"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, WORKER, str(pids_file)], env=env, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while not pids_file.exists() or not pids_file.read_text():
            assert time.monotonic() < deadline, "the stand-in worker never started its child"
            assert parent.poll() is None
            time.sleep(0.1)
        worker, child = (int(x) for x in pids_file.read_text().split())
        assert not process_gone(worker) and not process_gone(child)
        os.killpg(parent.pid, signal.SIGKILL)  # the trace's own process group, not the worker's
        parent.wait()
        deadline = time.monotonic() + 30  # a bound on waiting, not a speed claim
        while not (process_gone(worker) and process_gone(child)):
            assert time.monotonic() < deadline, "the worker or its child outlived the parent"
            time.sleep(0.2)
    finally:
        if not process_gone(parent.pid):
            os.killpg(parent.pid, signal.SIGKILL)
        if pids_file.exists() and pids_file.read_text():
            for pid in (int(x) for x in pids_file.read_text().split()):
                if not process_gone(pid):
                    os.kill(pid, signal.SIGKILL)


# -- finding 7: bad text is one line with the file and line number ---------------------------


def invalid_utf8(tmp_path: Path) -> Path:
    path = tmp_path / "bad.jsonl"
    good = json.dumps(EN).encode()
    path.write_bytes(good + b"\n" + b'{"id": "x", "lang": "ja", "text": "\xe6\x97 broken"}\n')
    return path


def test_invalid_utf8_in_trace_is_one_line(tmp_path: Path) -> None:
    path = invalid_utf8(tmp_path)
    status, _, err = cli(["trace", "--prompts", str(path), "--out", str(tmp_path / "r"), "--quiet"])
    assert_one_line_error(status, err, f"{path}:2:", "invalid UTF-8")
    assert not (tmp_path / "r").exists()


def test_invalid_utf8_in_tokens_is_one_line(tmp_path: Path) -> None:
    path = invalid_utf8(tmp_path)
    status, _, err = cli(["tokens", "--corpus", str(path), "--out", str(tmp_path / "o")])
    assert_one_line_error(status, err, f"{path}:2:", "invalid UTF-8")


def test_invalid_utf8_in_a_plans_corpus_is_one_line(tmp_path: Path) -> None:
    path = invalid_utf8(tmp_path)
    plan = tmp_path / "plan.toml"
    plan.write_text(
        textwrap.dedent(
            f"""\
            [bench]
            name = "x"
            [[model]]
            name = "m"
            path = "target"
            [[method]]
            name = "base"
            method = "none"
            [[corpus]]
            name = "c"
            path = "{path}"
            """
        )
    )
    status, _, err = cli(["bench", "--plan", str(plan), "--check"])
    assert_one_line_error(status, err, f"{path}:2:", "invalid UTF-8")


@pytest.mark.parametrize("escape", ["\\ud800", "\\udfff", "a\\udc80b"])
def test_lone_surrogate_in_tokens_is_one_line(tmp_path: Path, escape: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(EN) + "\n" + '{"id": "s", "lang": "en", "text": "' + escape + '"}\n')
    status, _, err = cli(["tokens", "--corpus", str(path), "--out", str(tmp_path / "o")])
    assert_one_line_error(status, err, f"{path}:2:", "lone surrogate", "'text'")


def test_surrogate_inside_messages_is_named(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"id": "s", "lang": "en", "messages": [{"role": "user", "content": "\\ud800"}]}\n'
    )
    with pytest.raises(TokenlensError, match=r"s\.jsonl:1: 'messages'\[0\]\.content holds a lone"):
        read_prompts(path)


# -- finding 8: prompt length is checked before the engine starts ----------------------------


@needs("transformers")
def test_too_long_prompt_is_refused_before_the_engine_starts(
    tiny_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Measured with the target's tokenizer (the tiny model's: Qwen2.5's, no weights)."""
    monkeypatch.setattr("tokenlens.trace.run.installed_vllm", lambda: "0.32.0")  # no engine
    long = {"id": "long-one", "lang": "en", "text": "tokens " * 400}
    path = write_prompts(tmp_path / "p.jsonl", [EN, long])
    out = tmp_path / "run"
    argv = ["trace", "--prompts", str(path), "--out", str(out), "--max-model-len", "256"]
    argv += ["--model", "tiny-qwen3", "--load-format", "dummy", "--cache", str(tiny_cache)]
    status, _, err = cli([*argv, "--max-tokens", "16", "--quiet"])
    assert_one_line_error(status, err, "'long-one'", "max_model_len 256")
    assert not out.exists(), "the run directory (and the engine) was started"


@needs("transformers")
def test_prompt_length_check_is_exact_at_the_limit(tiny_cache: Path, tmp_path: Path) -> None:
    """The Qwen2.5 tokenizer and chat template of a tiny model's directory (the embedded
    models' own, tests/test_study_vllm.py)."""
    from tokenlens.engine.config import EngineConfig
    from tokenlens.engine.runner import (
        capped_by_model_len,
        capped_note,
        check_prompt_lengths,
        jobs_from_prompts,
        load_hf_tokenizer,
    )

    prompts = read_prompts(write_prompts(tmp_path / "p.jsonl", [JA]))
    jobs = jobs_from_prompts(prompts, default=16)
    model = str(tiny_cache / "models" / "tiny-qwen3")
    tokenizer = load_hf_tokenizer(model)
    n = check_prompt_lengths(EngineConfig(model=model), jobs, 16, tokenizer)["a"]
    # Chat template (system + user turn + generation prompt) around the text's own tokens.
    assert n > len(tokenizer.encode(JA["text"], add_special_tokens=False)) + 10
    fits = EngineConfig(model=model, max_model_len=n + 16)
    assert check_prompt_lengths(fits, jobs, 16, tokenizer) == {"a": n}
    assert capped_by_model_len({"a": n}, jobs, 16, n + 16) == []
    assert capped_note([], n + 16) is None
    short = EngineConfig(model=model, max_model_len=n + 15)
    with pytest.raises(TokenlensError, match=f"'a' is {n} tokens long.*--allow-capped-output"):
        check_prompt_lengths(short, jobs, 16, tokenizer)
    # Opted in: vLLM's own rule only (room for one output token), and the prompt is named.
    one = EngineConfig(model=model, max_model_len=n + 1)
    assert check_prompt_lengths(one, jobs, 16, tokenizer, allow_capped=True) == {"a": n}
    assert capped_by_model_len({"a": n}, jobs, 16, n + 1) == ["a"]
    assert "'a'" in (capped_note(["a"], n + 1) or "")
    none = EngineConfig(model=model, max_model_len=n)
    with pytest.raises(TokenlensError, match=f"it needs {n + 1} > max_model_len {n}"):
        check_prompt_lengths(none, jobs, 16, tokenizer, allow_capped=True)


# -- finding 9 ---------------------------------------------------------------------------------


def test_tokens_treats_language_variants_as_one_language(tmp_path: Path) -> None:
    prompts = [
        {**JA, "id": "a1", "lang": "ja"},
        {**JA, "id": "a2", "lang": "JA"},
        {**JA, "id": "a3", "lang": "ja-JP"},
        {**EN, "lang": "en-US"},
    ]
    path = write_prompts(tmp_path / "p.jsonl", prompts)
    status, _, err = cli(["tokens", "--corpus", str(path), "--out", str(tmp_path / "o"), "--quiet"])
    assert status == 0, err
    by_lang = json.loads((tmp_path / "o" / "summary.json").read_text())["by_lang"]
    assert list(by_lang) == ["ja", "en"] and by_lang["ja"]["prompts"] == 3
    assert "| measure | ja | en |" in (tmp_path / "o" / "tokens.md").read_text()


def test_lang_selection_uses_the_same_normalisation(tmp_path: Path) -> None:
    from tokenlens.trace import select_prompts

    prompts = read_prompts(write_prompts(tmp_path / "p.jsonl", [{**JA, "lang": "ja-JP"}, EN]))
    assert [p.id for p in select_prompts(prompts, ("JA",), None)] == ["a"]


@pytest.mark.parametrize("content", ["", "   ", "\n"])
def test_empty_message_content_is_refused(tmp_path: Path, content: str) -> None:
    bad = {"id": "e", "lang": "en", "messages": [{"role": "user", "content": content}]}
    path = write_prompts(tmp_path / "p.jsonl", [EN, bad])
    status, _, err = cli(["tokens", "--corpus", str(path), "--out", str(tmp_path / "o")])
    assert_one_line_error(status, err, f"{path}:2:", "'messages[0].content'")


def test_tokens_has_quiet(tmp_path: Path) -> None:
    path = write_prompts(tmp_path / "p.jsonl", [JA, EN])
    status, out, err = cli(
        ["tokens", "--corpus", str(path), "--out", str(tmp_path / "o"), "--quiet"]
    )
    assert status == 0 and err == "", err
    assert out.strip() == str(tmp_path / "o")


@pytest.mark.vllm  # `bench --check` reads vLLM's config definitions
def test_bench_check_prints_no_vllm_import_notes() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tokenlens",
            "bench",
            "--plan",
            "plans/demo-cpu.toml",
            "--check",
            "--quiet",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Triton" not in proc.stderr and proc.stderr == "", proc.stderr


@pytest.mark.parametrize("pid", ["a#1", "#", "x#y#z"])
def test_hash_in_ids_is_refused(tmp_path: Path, pid: str) -> None:
    path = write_prompts(tmp_path / "p.jsonl", [{**EN, "id": pid}])
    with pytest.raises(TokenlensError, match=r":1: 'id' must not contain '#'"):
        read_prompts(path)


def capture_only(tmp_path: Path, keep_finished: bool) -> Path:
    """The real run as a killed trace leaves it: manifest (partial) and capture/ only."""
    run = copy_run(tmp_path / "run")
    for name in ("requests.parquet", "events.parquet", "metrics.json"):
        (run / name).unlink()
    if not keep_finished:
        for path in (run / "capture").glob("finished-*.jsonl"):
            path.unlink()
    return run


def salvage_real_run(run: Path, lengths: bool) -> dict[str, dict[str, object]]:
    """Salvage as trace does after a crash; ``lengths``: with the length each was sent with."""
    from tokenlens.salvage import salvage_partial

    truth = pq.read_table(REAL_RUN / "requests.parquet").to_pylist()
    langs = {r["request_id"]: r["lang"] for r in truth}
    pairs = {r["request_id"]: r["pair"] for r in truth}
    if lengths:
        cap = json.loads((run / "manifest.json").read_text())["trace_config"]["cap_tokens"]
        salvage_partial(run, "qwen2.5", langs, pairs, {rid: cap for rid in langs})
    else:
        salvage_partial(run, "qwen2.5", langs, pairs)
    return {r["request_id"]: r for r in pq.read_table(run / "requests.parquet").to_pylist()}


TRUTH = {r["request_id"]: r for r in pq.read_table(REAL_RUN / "requests.parquet").to_pylist()}


def test_salvage_infers_finish_reasons_from_step_files(tmp_path: Path) -> None:
    run = capture_only(tmp_path, keep_finished=False)
    salvaged = salvage_real_run(run, lengths=False)
    assert set(salvaged) == set(TRUTH)
    for rid, row in TRUTH.items():
        assert salvaged[rid]["output_token_ids"] == row["output_token_ids"]
        assert salvaged[rid]["output_text"] == row["output_text"]
        # The end-of-turn token says "stop"; "length" needs the length it was sent with.
        want = row["finish_reason"] if row["finish_reason"] == "stop" else None
        assert salvaged[rid]["finish_reason"] == want, rid
    salvaged = salvage_real_run(run, lengths=True)
    assert {rid: r["finish_reason"] for rid, r in salvaged.items()} == {
        rid: r["finish_reason"] for rid, r in TRUTH.items()
    }
    assert json.loads((run / "manifest.json").read_text())["salvage"]["unfinished"] == []


def test_salvage_takes_finished_requests_from_the_workers_records(tmp_path: Path) -> None:
    run = capture_only(tmp_path, keep_finished=True)
    salvaged = salvage_real_run(run, lengths=False)
    for rid, row in TRUTH.items():
        for key in ("output_text", "finish_reason", "token_logprob", "prompt_token_count"):
            assert salvaged[rid][key] == row[key], (rid, key)


def test_demo_report_commits_analysable_runs(tmp_path: Path) -> None:
    script = (REPO / "scripts" / "demo_report.sh").read_text()
    assert "TOKENLENS_DEMO_REUSE" in script, "demo_report.sh cannot copy an existing demo output"
    scratch, dest = tmp_path / "scratch", tmp_path / "dest"
    run = copy_run(scratch / "runs" / "draft_model-k3")
    (run / "engine.log").write_text("vLLM's log")
    env = {
        **os.environ,
        "TOKENLENS_DEMO_SCRATCH": str(scratch),
        "TOKENLENS_DEMO_REUSE": "1",
        "TOKENLENS_DEMO_DEST": str(dest),
    }
    proc = subprocess.run(
        ["bash", "scripts/demo_report.sh"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    copied = dest / "runs" / "draft_model-k3"
    names = {p.name for p in copied.iterdir()}
    assert names == {"manifest.json", "metrics.json", "requests.parquet", "events.parquet"}
    status, _, err = cli(["analyze", str(copied), "--out", str(tmp_path / "a"), "--quiet"])
    assert status == 0, err
