"""The method table (:mod:`tokenlens.engine.methods`): every layer reads its rows, and a
method it does not know stops ``analyze`` in one line until its family is declared."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.support import FakeVllm, assert_one_line_error, cli, copy_run, write_prompts
from tokenlens.engine.config import SamplingConfig
from tokenlens.engine.methods import (
    FREE,
    METHODS,
    METHODS_WITH_DRAFT_MODEL,
    NO_DRAFTER,
    REPLAYABLE,
    STAND_IN_METHODS,
    TRAINED,
    family_of,
    parse_declarations,
    speculative_names,
)
from tokenlens.errors import TokenlensError
from tokenlens.rundir import read_run
from tokenlens.trace import TraceConfig, run_trace

FAST = ["--quiet", "--bootstrap", "10", "--no-regression"]


def test_the_rows_are_consistent() -> None:
    from tokenlens.doctor import DoctorConfig
    from tokenlens.models.tiny import TINY_CONFIGS

    assert {m.family for m in METHODS.values()} == {TRAINED, FREE, NO_DRAFTER}
    with_model = {"draft_model", "dflash", "eagle", "eagle3", "medusa", "mlp_speculator"}
    assert with_model == METHODS_WITH_DRAFT_MODEL
    for method in STAND_IN_METHODS:
        target, drafter = METHODS[method].stand_in or ("", None)
        assert target in TINY_CONFIGS and (drafter is None or drafter in TINY_CONFIGS)
        assert (drafter is not None) == METHODS[method].drafter_model
    assert DoctorConfig().methods == STAND_IN_METHODS
    assert REPLAYABLE == ("draft_model", "ngram")


def test_the_table_names_methods_vllm_has() -> None:
    names = speculative_names()
    if names is None:
        pytest.skip("needs the installed vLLM's sources")
    assert sorted(set(METHODS) - {"none"} - names.methods) == []


def test_an_unknown_method_has_no_family_until_declared() -> None:
    assert family_of("ngram") == FREE and family_of("mtp") == TRAINED
    with pytest.raises(TokenlensError, match=r"'my_drafter'.*--method-family my_drafter=trained"):
        family_of("my_drafter")
    assert family_of("my_drafter", {"my_drafter": FREE}) == FREE


@pytest.mark.parametrize(
    ("item", "needle"),
    [
        ("my_drafter", "METHOD=FAMILY"),
        ("my_drafter=fast", "trained or training_free"),
        ("my_drafter=none", "trained or training_free"),
        ("ngram=trained", "says ngram is training_free"),
    ],
)
def test_declarations_are_checked(item: str, needle: str) -> None:
    with pytest.raises(TokenlensError, match=needle):
        parse_declarations([item])
    assert parse_declarations(["x=trained", "y = training_free"]) == {"x": TRAINED, "y": FREE}


def _my_drafter_run(tmp_path: Path) -> Path:
    run = copy_run(tmp_path / "run")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["speculative"]["method"] = "my_drafter"
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_analyze_refuses_an_unknown_method_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    status, _, err = cli(["analyze", str(_my_drafter_run(tmp_path)), "--out", str(out), *FAST])
    assert_one_line_error(status, err, "'my_drafter'", "--method-family my_drafter=trained")
    assert not out.exists()  # nothing written, as a trained drafter or otherwise


def test_a_declared_family_is_the_one_analysed(tmp_path: Path) -> None:
    """Declared training-free, the run is the control family (and costs nothing to
    draft in the speed model): proof that no default made it a trained drafter."""
    out = tmp_path / "out"
    run = _my_drafter_run(tmp_path)
    args = ["analyze", str(run), "--out", str(out), "--method-family", "my_drafter=training_free"]
    status, _, err = cli([*args, *FAST])
    assert status == 0, err
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["families"]) == [FREE]
    assert summary["families"][FREE]["methods"] == ["my_drafter"]
    assert summary["runs"][0]["speed"]["draft_cost"] == 0.0
    family = pq.read_table(out / "tokens.parquet", columns=["family"]).column("family")
    assert set(family.to_pylist()) == {FREE}


def test_trace_records_a_method_vllm_has_and_the_table_does_not(
    tmp_path: Path, tiny_cache: Path, fake_vllm: FakeVllm
) -> None:
    """`dspark` is one of vLLM's methods without a row: traced and recorded as it is,
    then refused by analyze until its family is declared."""
    names = speculative_names()
    if names is None or "dspark" not in names.methods:
        pytest.skip("needs the sources of a vLLM with the dspark method")
    prompts = [
        {"id": f"{x}-0", "lang": x, "pair": "p0", "text": "四季 seasons"} for x in ("ja", "en")
    ]
    config = TraceConfig(
        prompts=write_prompts(tmp_path / "p.jsonl", prompts),
        out=tmp_path / "run",
        model="tiny-qwen3",
        draft_model="tiny-mimo-mtp",
        method="dspark",
        k=2,
        load_format="dummy",
        cache=tiny_cache,
        sampling=SamplingConfig(max_tokens=12, logprobs=2),
    )
    run = read_run(run_trace(config, start=fake_vllm))
    assert run.manifest["speculative"]["method"] == "dspark" and run.complete
    out = tmp_path / "out"
    status, _, err = cli(["analyze", str(run.path), "--out", str(out), *FAST])
    assert_one_line_error(status, err, "'dspark'", "--method-family dspark=trained")
    assert not out.exists()
