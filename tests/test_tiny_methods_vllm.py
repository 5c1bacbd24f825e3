"""MTP and D-Flash, the speculative methods of the original study, through tokenlens on CPU.

The study's models (Qwen3.5, Qwen3-Next) cannot run on vLLM's CPU build, so the code
paths are proven with the weightless tiny models of :mod:`tokenlens.models.tiny` and
vLLM's dummy (random) weights: trace -> run directory whose events reconcile exactly
with vLLM's counters -> analyze. Acceptance is meaningless here (random drafters accept
nothing), so only the plumbing is asserted, never a rate.

The first tests need no vLLM (a stand-in drafter directory, no engine): tiny names
resolve wherever a model is named, and ``--load-format`` reaches the engine config and
the manifest. The ``vllm`` tests start one engine per method (~80 s each here).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.support import check_events, needs, write_prompts
from tokenlens.analysis.pipeline import AnalyzeConfig, run_analyze
from tokenlens.cli import main
from tokenlens.engine.config import SamplingConfig
from tokenlens.errors import TokenlensError
from tokenlens.models import tiny
from tokenlens.models.embedded import MARKER
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
    "mtp": {"model": "tiny-mimo-mtp", "method": "mtp", "draft_model": None, "num_spec": 2},
    "dflash": {
        "model": "tiny-qwen3",
        "method": "dflash",
        "draft_model": "tiny-qwen3-dflash",
        "num_spec": 3,
    },
}


@pytest.fixture
def fake_drafter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the embedded drafter's directory (only its tokenizer files are read)."""
    source = tmp_path / "drafter"
    source.mkdir()
    for name in tiny.TOKENIZER_FILES:
        (source / name).write_text(f"{name}\n")
    monkeypatch.setattr(tiny, "ensure_model", lambda *args, **kwargs: source)
    return source


@needs("safetensors")
def test_tiny_dirs_are_built_once_and_rebuilt_when_stale(
    fake_drafter: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    out = tiny.ensure_tiny("tiny-qwen3-dflash", cache)
    assert out == cache / "models" / "tiny-qwen3-dflash"
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["DFlashDraftModel"]
    assert (out / "tokenizer.json").read_text() == "tokenizer.json\n"
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


def test_tiny_names_resolve_and_are_recorded(fake_drafter: Path, tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", PROMPTS)
    models = tmp_path / "cache" / "models"
    config = TraceConfig(
        prompts=prompts,
        out=tmp_path / "run",
        cache=tmp_path / "cache",
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

    def fake_run_trace(config: TraceConfig, progress: object) -> Path:
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


@pytest.fixture(scope="module", params=list(CASES))
def tiny_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One traced run per method: 1 ja + 1 en prompt, dummy weights, EOS ignored."""
    method: str = request.param
    tmp = tmp_path_factory.mktemp(method)
    config = TraceConfig(
        prompts=write_prompts(tmp / "p.jsonl", PROMPTS),
        out=tmp / "run",
        load_format="dummy",
        # ignore_eos: random weights may pick EOS at once and leave nothing to verify.
        sampling=SamplingConfig(max_tokens=MAX_TOKENS, logprobs=5, ignore_eos=True),
        max_model_len=1024,
        **CASES[method],
    )
    return read_run(run_trace(config))


@pytest.mark.vllm
def test_trace_reconciles_exactly(tiny_run: Run) -> None:
    man = tiny_run.manifest
    case = CASES[man["speculative"]["method"]]
    k = case["num_spec"]
    assert man["status"] == "complete" and man["vllm_version"] == "0.32.0"
    assert man["model"] == case["model"] and man["speculative"]["model"] == case["draft_model"]
    assert man["speculative"]["num_speculative_tokens"] == k
    assert man["load_format"] == "dummy" and "|weights:dummy" in man["signature"]
    assert man["reconciliation"] == {"exact": True, "differences": []}
    m = tiny_run.metrics
    assert m.num_drafts > 0
    assert m.num_draft_tokens == k * m.num_drafts
    assert len(m.accepted_per_position) == k
    assert sum(m.accepted_per_position) == m.num_accepted_tokens
    check_events(tiny_run)
    rows = {r["request_id"]: r for r in tiny_run.requests.to_pylist()}
    assert set(rows) == {"ja", "en"}
    for row in rows.values():
        assert len(row["output_token_ids"]) == MAX_TOKENS
        assert len(row["token_logprob"]) == MAX_TOKENS


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
