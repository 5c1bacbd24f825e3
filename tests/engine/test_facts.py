"""The manifest's ``engine`` facts: how they are read and merged (no engine started)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tokenlens.capture.summary import SERVED_WORKERS, served_engine_facts
from tokenlens.engine import facts
from tokenlens.engine.facts import EngineFactsExtension, merge_facts, runner_from_config


def test_the_extension_adds_one_method_and_nothing_else() -> None:
    """vLLM refuses a worker extension with any attribute its worker class already has."""
    own = [a for a in dir(EngineFactsExtension) if not a.startswith("__")]
    assert own == [facts.RPC_METHOD]


class _Runner:
    def __init__(self, **drafter: Any) -> None:
        self.__dict__.update(drafter)


class NgramProposer:  # stands in for vLLM's V1 drafter
    pass


class Speculator:  # stands in for a V2 speculator
    pass


def _worker(runner: Any, v2: bool | None) -> Any:
    class Worker(EngineFactsExtension):
        pass

    worker = Worker()
    worker.model_runner = runner  # type: ignore[attr-defined]
    worker.device = SimpleNamespace(type="cpu")  # type: ignore[attr-defined]
    worker.rank = 0  # type: ignore[attr-defined]
    if v2 is not None:
        worker.use_v2_model_runner = v2  # type: ignore[attr-defined]
    return worker


def test_the_worker_reports_its_runner_and_drafter() -> None:
    v1 = _worker(_Runner(drafter=NgramProposer()), v2=False).tokenlens_engine_facts()
    assert v1["model_runner"] == "V1"
    assert v1["model_runner_class"] == f"{__name__}._Runner"
    assert v1["drafter_class"] == f"{__name__}.NgramProposer"
    assert v1["device_type"] == "cpu" and v1["device_name"]
    v2 = _worker(_Runner(speculator=Speculator()), v2=None).tokenlens_engine_facts()
    assert v2["model_runner"] is None  # the worker does not say: the config decides
    assert v2["drafter_class"] == f"{__name__}.Speculator"
    json.dumps(v2)  # plain values: they cross vLLM's msgpack RPC without pickling


CONFIG = {
    "model_runner": "V1",
    "model_runner_source": "VllmConfig.use_v2_model_runner",
    "model_runner_class": None,
    "async_scheduling": False,
    "speculative_method": "ngram",
    "num_speculative_tokens": 3,
    "dynamic_k": None,
    "drafter_class": None,
    "dtype": "float32",
    "quantization": None,
    "device": {"type": "cpu", "name": "x", "used": 1, "visible": 1},
    "cuda_version": None,
    "parallel": {"tensor": 1, "pipeline": 1, "data": 1},
}


def test_live_worker_facts_win_over_the_config() -> None:
    worker = {
        "model_runner": "V2",
        "model_runner_class": "vllm.v1.worker.gpu.model_runner.GPUModelRunner",
        "drafter_class": "vllm.v1.worker.gpu.spec_decode.ngram.NgramSpeculator",
        "device_type": "cuda",
        "device_name": "NVIDIA H200",
        "cuda_version": "13.0",
    }
    merged = merge_facts(CONFIG, [worker, {**worker, "rank": 1}])
    assert merged["model_runner"] == "V2"
    assert merged["model_runner_source"] == "the engine's workers"
    assert merged["drafter_class"].endswith("NgramSpeculator")
    assert merged["device"]["name"] == "NVIDIA H200" and merged["device"]["workers"] == 2
    assert merged["cuda_version"] == "13.0"
    assert merged["unavailable"] == {}


def test_without_workers_the_missing_facts_say_why() -> None:
    merged = merge_facts(CONFIG, None, "because")
    assert merged["drafter_class"] is None and merged["model_runner_class"] is None
    assert merged["unavailable"] == {"model_runner_class": "because", "drafter_class": "because"}
    plain = merge_facts({**CONFIG, "speculative_method": None}, None, "because")
    assert "drafter_class" not in plain["unavailable"]  # nothing to draft: not missing


def test_runner_from_a_config_that_decides() -> None:
    class Config:
        use_v2_model_runner = True

    assert runner_from_config(Config()) == ("V2", "VllmConfig.use_v2_model_runner")


def test_runner_of_a_vllm_without_the_v1_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM 0.34 removed the V1 model runner: its module is gone, every runner is V2."""
    monkeypatch.setattr(facts.importlib.util, "find_spec", lambda name: None)
    runner, why = runner_from_config(object())
    assert runner == "V2" and facts.V1_RUNNER_MODULE in why


def test_a_served_run_records_the_plugins_view(tmp_path: Path) -> None:
    status = {"state": "recording", "scheduler_class": "S", "engine": CONFIG}
    (tmp_path / "capture-h-1.json").write_text(json.dumps(status), encoding="utf-8")
    merged = served_engine_facts(tmp_path)
    assert merged is not None and merged["source"] == "plugin"
    assert merged["async_scheduling"] is False and merged["dtype"] == "float32"
    assert merged["unavailable"]["drafter_class"] == SERVED_WORKERS
    assert served_engine_facts(tmp_path / "empty") is None


def test_the_resolved_speculative_options_are_facts() -> None:
    """n-gram's lookup window is recorded as vLLM resolved it, defaults included."""
    from tokenlens.engine.facts import config_facts

    spec = SimpleNamespace(
        method="ngram",
        num_speculative_tokens=3,
        prompt_lookup_min=2,
        prompt_lookup_max=5,
        enforce_eager=None,
        parallel_drafting=object(),  # not plain data: left out
    )
    facts = config_facts(SimpleNamespace(speculative_config=spec))
    assert facts["speculative_options"] == {"prompt_lookup_min": 2, "prompt_lookup_max": 5}
    assert config_facts(SimpleNamespace())["speculative_options"] is None
    json.dumps(facts)
