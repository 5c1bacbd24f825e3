"""Engine options: parsed, checked against vLLM's EngineArgs, recorded (no engine started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import PLAN, assert_one_line_error, cli, write_plan, write_prompts
from tokenlens.bench.config import engine_config, trace_config
from tokenlens.bench.plan import load_plan
from tokenlens.engine.options import (
    RESERVED,
    check_engine_options,
    installed_engine_arguments,
    options_label,
    parse_engine_options,
)
from tokenlens.engine.vllm_source import installed_root
from tokenlens.errors import TokenlensError
from tokenlens.prompts import read_prompts
from tokenlens.trace import TraceConfig, build_engine_config, manifest_for

KNOWN = frozenset({"quantization", "tensor_parallel_size", "max_num_seqs", "compilation_config"})


def test_values_are_json_where_they_parse() -> None:
    parsed = parse_engine_options(
        ["quantization=fp8", "tensor-parallel-size=2", "enforce_eager=true",
         'compilation_config={"level": 0}', "gpu_memory_utilization=0.85"]
    )  # fmt: skip
    assert parsed == {
        "quantization": "fp8",
        "tensor_parallel_size": 2,
        "enforce_eager": True,
        "compilation_config": {"level": 0},
        "gpu_memory_utilization": 0.85,
    }
    assert options_label(parsed) == (
        'compilation_config={"level":0},enforce_eager=true,gpu_memory_utilization=0.85,'
        "quantization=fp8,tensor_parallel_size=2"
    )


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["quantization"], "--engine-option expects KEY=VALUE, got 'quantization'"),
        (["=fp8"], "--engine-option expects KEY=VALUE"),
        (["max_num_seqs=4", "max_num_seqs=8"], "--engine-option max_num_seqs is given twice"),
    ],
)
def test_malformed_options_are_refused(items: list[str], message: str) -> None:
    with pytest.raises(TokenlensError, match=message):
        parse_engine_options(items)


def test_unknown_and_reserved_keys_are_refused_in_one_line() -> None:
    check_engine_options({"quantization": "fp8"}, KNOWN)
    with pytest.raises(TokenlensError) as unknown:
        check_engine_options({"quantisation": "fp8"}, KNOWN)
    assert str(unknown.value) == (
        "--engine-option quantisation: not an argument of the installed vLLM's engine "
        "(vllm.engine.arg_utils.EngineArgs) (did you mean quantization?)"
    )
    with pytest.raises(
        TokenlensError, match="--engine-option dtype: tokenlens sets it; use --dtype"
    ):
        check_engine_options({"dtype": "float16"}, KNOWN)
    check_engine_options({"anything": 1}, None)  # no readable EngineArgs: vLLM decides
    assert "speculative_config" in RESERVED and "disable_log_stats" in RESERVED


@pytest.mark.skipif(installed_root() is None, reason="needs the installed vLLM's sources")
def test_the_installed_engine_arguments_are_read_from_source() -> None:
    names = installed_engine_arguments()
    assert names is not None
    assert {"quantization", "tensor_parallel_size", "gpu_memory_utilization"} <= names
    assert {"max_num_seqs", "compilation_config", "enable_prefix_caching"} <= names


@pytest.mark.skipif(installed_root() is None, reason="needs the installed vLLM's sources")
def test_trace_refuses_an_unknown_engine_option_before_anything(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", [{"id": "a", "lang": "en", "text": "hi"}])
    out = tmp_path / "run"
    status, _, err = cli(
        ["trace", "--prompts", str(prompts), "--out", str(out), "--engine-option", "max_num_seq=4"]
    )
    assert_one_line_error(
        status, err, "--engine-option max_num_seq: not an argument", "max_num_seqs"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("pipeline_parallel_size=2", "--engine-option pipeline parallelism"),
        ("data_parallel_size=2", "--engine-option data_parallel_size=2: vLLM's in-process LLM"),
    ],
)
def test_trace_refuses_a_parallel_layout_it_cannot_trace(
    tmp_path: Path, option: str, message: str
) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", [{"id": "a", "lang": "en", "text": "hi"}])
    out = tmp_path / "run"
    status, _, err = cli(
        ["trace", "--prompts", str(prompts), "--out", str(out), "--engine-option", option]
    )
    assert_one_line_error(status, err, message)
    assert not out.exists()


def test_a_server_runs_its_own_engine_arguments(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", [{"id": "a", "lang": "en", "text": "hi"}])
    status, _, err = cli(
        ["trace", "--prompts", str(prompts), "--out", str(tmp_path / "run"),
         "--server", "http://127.0.0.1:9", "--server-trace-dir", str(tmp_path),
         "--engine-option", "max_num_seqs=4"]
    )  # fmt: skip
    assert_one_line_error(status, err, "--engine-option configures the engine tokenlens starts")


def test_options_reach_the_engine_the_manifest_and_the_signature(tmp_path: Path) -> None:
    prompts_path = write_prompts(tmp_path / "p.jsonl", [{"id": "a", "lang": "en", "text": "hi"}])
    model = tmp_path / "model"
    model.mkdir()
    options = {"quantization": "fp8", "max_num_seqs": 4}
    config = TraceConfig(
        prompts=prompts_path,
        out=tmp_path / "run",
        model=str(model),
        method="ngram",
        engine_options=options,
        engine_extra={"async_scheduling": False},
    )
    engine = build_engine_config(config)
    assert engine.extra == {**options, "async_scheduling": False}
    manifest = manifest_for(config, read_prompts(prompts_path), "0.32.0")
    assert manifest["engine_options"] == options
    assert manifest["trace_config"]["engine_options"] == options
    assert "|engine:max_num_seqs=4,quantization=fp8" in manifest["signature"]
    plain = manifest_for(
        TraceConfig(prompts=prompts_path, out=tmp_path / "r", model=str(model)),
        read_prompts(prompts_path),
        "0.32.0",
    )
    assert "engine:" not in plain["signature"]  # runs without options keep their signature


def test_a_plan_engine_table_is_recorded_and_the_prefix_cache_is_off(tmp_path: Path) -> None:
    plan = load_plan(
        write_plan(
            tmp_path,
            PLAN.replace(
                'path = "some/model"', 'path = "some/model"\nengine = { max_num_seqs = 4 }'
            ),
        )
    )
    case = plan.cases[0]
    tconf = trace_config(plan, case, tmp_path / "out", None)
    assert tconf.engine_options == {"max_num_seqs": 4}
    econf = engine_config(plan, case, tmp_path / "capture", None)
    assert econf.extra["max_num_seqs"] == 4
    assert econf.extra["enable_prefix_caching"] is False  # repeats would hit it otherwise
    on = load_plan(
        write_plan(
            tmp_path,
            PLAN.replace(
                'path = "some/model"',
                'path = "some/model"\nengine = { enable_prefix_caching = true }',
            ),
        )
    )
    assert engine_config(on, on.cases[0], tmp_path / "c", None).extra["enable_prefix_caching"]


@pytest.mark.parametrize("key", ["dtype", "model", "speculative_config", "max_model_len"])
def test_a_plan_engine_table_cannot_override_what_tokenlens_sets(tmp_path: Path, key: str) -> None:
    text = PLAN.replace('path = "some/model"', f'path = "some/model"\nengine = {{ {key} = "x" }}')
    with pytest.raises(TokenlensError, match=rf"\[\[model\]\] 'm'.engine.{key}: tokenlens sets it"):
        load_plan(write_plan(tmp_path, text))


def test_a_plan_engine_table_with_pipeline_parallelism_is_refused(tmp_path: Path) -> None:
    text = PLAN.replace(
        'path = "some/model"', 'path = "some/model"\nengine = { pipeline_parallel_size = 2 }'
    )
    with pytest.raises(TokenlensError, match=r"\[\[model\]\] 'm'.engine: pipeline parallelism"):
        load_plan(write_plan(tmp_path, text))


def test_a_refused_vllm_is_one_line_naming_the_missing_piece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A release whose surface check fails: refused before any engine, never a traceback."""
    from tokenlens.capture import surface, tiers

    report = surface.SurfaceReport(
        "9.9.9",
        (surface.Assumption("ModelRunnerOutput fields", False, "missing ['req_ids']"),),
        None,
    )
    monkeypatch.setattr(tiers, "installed_tier", lambda: (report, tiers.tier_for("9.9.9", report)))
    monkeypatch.setattr("tokenlens.trace.run.installed_vllm", lambda: "9.9.9")
    prompts = write_prompts(tmp_path / "p.jsonl", [{"id": "a", "lang": "en", "text": "hi"}])
    out = tmp_path / "run"
    status, _, err = cli(["trace", "--prompts", str(prompts), "--out", str(out)])
    assert_one_line_error(
        status, err, "vLLM 9.9.9 cannot be traced: ModelRunnerOutput fields (missing ['req_ids'])"
    )
    assert not out.exists()
