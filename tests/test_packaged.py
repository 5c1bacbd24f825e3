"""Shipped corpora and plans, from a checkout: names and README paths both resolve."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import REPO
from tokenlens.errors import TokenlensError
from tokenlens.packaged import plans_dir, resolve_corpus, resolve_plan


def test_names_resolve_to_the_checkout_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # not a checkout: README paths fall back to the shipped files
    assert resolve_plan("qwen35-rtx4070") == REPO / "plans" / "qwen35-rtx4070.toml"
    assert resolve_plan("plans/demo-cpu.toml") == REPO / "plans" / "demo-cpu.toml"
    assert resolve_corpus("demo") == REPO / "corpora" / "demo.jsonl"
    assert resolve_corpus("corpora/policy.jsonl") == REPO / "corpora" / "policy.jsonl"
    shipped = {p.stem for p in plans_dir().glob("*.toml")}
    assert {"demo-cpu", "demo-cpu-small", "qwen35-rtx4070"} <= shipped


def test_an_existing_path_wins_over_a_shipped_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo").write_text("{}\n")
    assert resolve_corpus("demo") == Path("demo")


def test_unknown_names_list_what_is_shipped() -> None:
    with pytest.raises(
        TokenlensError, match=r"^file not found: nope \(nor a shipped plan: .*qwen35-rtx4070"
    ):
        resolve_plan("nope")
