"""Plan validation: every bad key gives one line naming it; cases expand as documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import PLAN, REPO, write_plan
from tokenlens.bench.check import validated_plan
from tokenlens.bench.plan import load_plan
from tokenlens.bench.vllm_check import check_plan, vllm_vocabulary
from tokenlens.errors import TokenlensError


def test_cases_expand_in_engine_order(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, PLAN))
    assert [c.case_id for c in plan.cases] == [
        "m/baseline/c/all/ja",
        "m/baseline/c/all/en",
        "m/ng-k1/c/all/ja",
        "m/ng-k1/c/all/en",
        "m/ng-k3/c/all/ja",
        "m/ng-k3/c/all/en",
    ]
    assert [len(c.prompts) for c in plan.cases] == [2] * 6
    assert (plan.warmup, plan.repeats, plan.concurrency) == (1, 2, 1)
    assert plan.warmup_tokens is None
    assert plan.sampling.temperature == 0.0 and plan.sampling.thinking is False


def test_lengths_limit_and_k_selection(tmp_path: Path) -> None:
    text = PLAN.replace('path = "some/model"', 'path = "some/model"\nmethods = ["ng:3"]')
    text = text.replace(
        'path = "prompts.jsonl"',
        'path = "prompts.jsonl"\nlengths = ["long", "medium"]\nlimit = 1\nlangs = ["en"]',
    )
    plan = load_plan(write_plan(tmp_path, text))
    assert [c.case_id for c in plan.cases] == ["m/ng-k3/c/medium/en", "m/ng-k3/c/long/en"]
    assert [[p.id for p in c.prompts] for c in plan.cases] == [["a-en"], ["b-en"]]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("repeats = 2", "repeats = 0", "[bench].repeats: must be at least 1, got 0"),
        ("repeats = 2", "repeat = 2", "[bench]: unknown key 'repeat'"),
        ("repeats = 2", "repeats = 2\nwarmup_tokens = 0", "[bench].warmup_tokens: must be at"),
        ("repeats = 2", 'repeats = "5"', "[bench].repeats: expected an integer, got str"),
        ("k = [1, 3]", "k = [1, 1]", "[[method]] 'ng'.k: repeats a value"),
        ("k = [1, 3]", "k = 0", "[[method]] 'ng'.k: expected a positive integer"),
        ("k = [1, 3]", "kk = 3", "[[method]] 'ng': unknown key 'kk'"),
        ('method = "none"', 'method = "none"\nk = 3', "a baseline ('none') takes no k"),
        (
            'method = "ngram"',
            'method = "draft_model"',
            "'ng'.draft_model: method 'draft_model' needs",
        ),
        ('path = "prompts.jsonl"', 'path = "nope.jsonl"', "[[corpus]] 'c'.path: no such file"),
        (
            'path = "prompts.jsonl"',
            'path = "prompts.jsonl"\nlangs = ["fr"]',
            "no prompt of language 'fr'",
        ),
        ('name = "m"', 'name = "m/x"', "[[model]] #1.name: 'm/x' must be letters"),
        ('path = "some/model"', 'path = "x"\nmethods = ["nope"]', "no [[method]] named 'nope'"),
        (
            'path = "some/model"',
            'path = "x"\nmethods = ["ng:2"]',
            "selects k values the method does not list",
        ),
        ('name = "ng"', 'name = "baseline"', "[[method]]: name 'baseline' is used twice"),
        ("[bench]", "[benchmark]", "plan: unknown key 'benchmark'"),
        ("[bench]", "[sampling]\ntop_p = 0\n[bench]", "[sampling].top_p: must be in (0, 1]"),
    ],
)
def test_bad_plans_give_one_line_naming_the_key(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    assert old in PLAN
    path = write_plan(tmp_path, PLAN.replace(old, new, 1))
    with pytest.raises(TokenlensError) as info:
        load_plan(path)
    text = str(info.value)
    assert message in text and "\n" not in text and text.startswith(str(path))


def test_not_toml(tmp_path: Path) -> None:
    path = tmp_path / "plan.toml"
    path.write_text("[bench\n", encoding="utf-8")
    with pytest.raises(TokenlensError, match="not valid TOML"):
        load_plan(path)


# The tests below import vLLM (its config definitions; no engine): marked like every
# test that needs vLLM installed, so `-m "not vllm"` runs without it.


@pytest.fixture(scope="module")
def vocab():  # type: ignore[no-untyped-def]
    return vllm_vocabulary()


@pytest.mark.vllm
def test_vllm_vocabulary_is_read_from_vllm(vocab) -> None:  # type: ignore[no-untyped-def]
    # The names the original study needs, as the pinned vLLM defines them.
    assert {"mtp", "dflash", "draft_model", "ngram", "eagle3", "suffix"} <= vocab.methods
    assert {"num_speculative_tokens", "prompt_lookup_max"} <= vocab.speculative_keys
    assert {"gpu_memory_utilization", "quantization"} <= vocab.engine_keys
    assert "fp8" in vocab.quantizations and "dummy" in vocab.load_formats


@pytest.mark.vllm
@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('method = "ngram"', 'method = "ngramm"', "vLLM has no speculative method 'ngramm'"),
        ("k = [1, 3]", "k = [1, 3]\noptions = { lookup = 2 }", "options.lookup: not a field"),
        ('path = "some/model"', 'path = "x"\ndtype = "fp7"', "'m'.dtype: vLLM accepts"),
        ('path = "some/model"', 'path = "x"\nquantization = "q9"', "vLLM has no method 'q9'"),
        ('path = "some/model"', 'path = "x"\nload_format = "zip"', "no load format 'zip'"),
        ('path = "some/model"', 'path = "x"\nengine = { gpu_mem = 1 }', "engine.gpu_mem: not an"),
    ],
)
def test_vllm_check_names_the_bad_key(  # type: ignore[no-untyped-def]
    tmp_path: Path, vocab, old: str, new: str, message: str
) -> None:
    plan = load_plan(write_plan(tmp_path, PLAN.replace(old, new, 1)))
    problems = check_plan(plan, vocab)
    assert len(problems) == 1 and message in problems[0]


@pytest.mark.vllm
@pytest.mark.parametrize("name", ["demo-cpu.toml", "qwen35-rtx4070.toml", "gpu-real-h200.toml"])
def test_shipped_plans_pass_vllm_check(name: str) -> None:
    plan = validated_plan(REPO / "plans" / name)
    assert plan.cases


@pytest.mark.vllm
def test_qwen35_plan_is_the_original_series() -> None:
    plan = validated_plan(REPO / "plans" / "qwen35-rtx4070.toml")
    combos = {(c.model.name, c.method.method, c.k) for c in plan.cases}
    for model in ("qwen35-2b-fp16", "qwen35-2b-fp8", "qwen35-2b-awq4"):
        assert {(model, "mtp", k) for k in (1, 3, 5)} | {(model, "none", 0)} <= combos
    assert {("qwen35-4b-fp8", "dflash", 15), ("qwen35-4b-fp8", "mtp", 3)} <= combos
    assert ("qwen35-4b-fp8", "none", 0) in combos
    assert {c.length for c in plan.cases} == {"medium", "long"}
    assert {c.lang for c in plan.cases} == {"ja", "en"}
    assert (plan.warmup, plan.repeats) == (1, 5)
    assert all(
        c.method.draft_model == "z-lab/Qwen3.5-4B-DFlash"
        for c in plan.cases
        if c.method.method == "dflash"
    )


def test_gpu_real_h200_plan_compares_like_for_like() -> None:
    """The H200 plan (issue 31): both baselines, the drafters, both batch sizes."""
    plan = load_plan(REPO / "plans" / "gpu-real-h200.toml")
    combos = {(c.method.name, c.k, c.concurrency, c.lang) for c in plan.cases}
    for conc in (1, 32):
        for lang in ("ja", "en"):
            assert {("baseline", 0, conc, lang), ("baseline-v1", 0, conc, lang)} <= combos
            assert {("draft", k, conc, lang) for k in (1, 3, 5)} <= combos
            assert ("ngram", 3, conc, lang) in combos
    methods = {m.name: m for m in plan.methods}
    assert methods["baseline-v1"].env == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert methods["baseline-v1"].engine == {"async_scheduling": False}
    assert methods["baseline"].env == {} and methods["baseline"].engine == {}
    assert methods["ngram"].options == {"prompt_lookup_min": 1, "prompt_lookup_max": 4}
    assert methods["draft"].draft_model == "qwen2.5-coder-0.5b-instruct"
    assert plan.models[0].path == "qwen2.5-coder-1.5b-instruct"
    assert (plan.warmup, plan.repeats, plan.sampling.max_tokens) == (1, 2, 128)
    assert {c.corpus.path.name for c in plan.cases} == {"prompts.jsonl"}
    assert {len(c.prompts) for c in plan.cases if c.concurrency == 32} == {32}
