"""``tokenlens tokens`` end to end on tests/text/data/mini.jsonl."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tokenlens.cli import build_parser, main
from tokenlens.errors import TokenlensError
from tokenlens.prompts import read_prompts
from tokenlens.signature import parse_signature
from tokenlens.text.study import TokensConfig, prompt_text, run_tokens_study

DATA = Path(__file__).parent / "data" / "mini.jsonl"
CONTRACT_COLUMNS = [
    "prompt_id",
    "lang",
    "token_index",
    "token_id",
    "token_text",
    "byte_start",
    "byte_end",
    "char_start",
    "char_end",
    "script",
    "pos",
    "is_particle",
    "boundary",
]


def _parser() -> argparse.ArgumentParser:
    return build_parser()


def test_study_writes_contract_files(tmp_path: Path) -> None:
    result = run_tokens_study(TokensConfig(corpus=DATA, tokenizer="qwen3.5", out=tmp_path))
    table = pq.read_table(result.tokens_path)
    # Every contract column, in the contract's order (other columns may sit between).
    assert [c for c in table.column_names if c in CONTRACT_COLUMNS] == CONTRACT_COLUMNS
    # Offsets point into the prompt text: each prompt's tokens tile it.
    texts = {p.id: prompt_text(p) for p in read_prompts(DATA)}
    for pid, text in texts.items():
        rows = [r for r in table.to_pylist() if r["prompt_id"] == pid]
        assert (
            b"".join(text.encode()[r["byte_start"] : r["byte_end"]] for r in rows) == text.encode()
        )
        assert rows[-1]["char_end"] == len(text)
    summary = json.loads(result.summary_path.read_text(encoding="utf-8"))
    fields = parse_signature(summary["signature"])
    assert fields["tokenizer"].startswith("qwen3.5") and "UniDic_2.1.2" in fields["dict"]
    assert list(summary["by_lang"]) == ["ja", "en"]
    for lang in ("ja", "en"):
        s = summary["by_lang"][lang]
        for key in (
            "chars_per_token",
            "bytes_per_token",
            "share_by_script",
            "share_by_boundary",
            "byte_fragment_share",
            "particle_fusion_share",
        ):
            assert key in s
        assert abs(sum(s["share_by_script"].values()) - 1) < 1e-9
        assert abs(sum(s["share_by_boundary"].values()) - 1) < 1e-9
    ja, en = summary["by_lang"]["ja"], summary["by_lang"]["en"]
    assert ja["chars_per_token"] < en["chars_per_token"]
    assert ja["particle_fusion_share"] > 0 == en["particle_fusion_share"]
    md = result.markdown_path.read_text(encoding="utf-8")
    assert "| measure | ja | en |" in md and "characters per token" in md


def test_cli_handler_runs_the_study(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _parser().parse_args(
        ["tokens", "--corpus", str(DATA), "--tokenizer", "qwen2.5", "--out", str(tmp_path / "o")]
    )
    assert args.handler(args) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "o")
    assert (tmp_path / "o" / "tokens.parquet").is_file()


def test_cli_help_teaches(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["tokens", "--help"])
    out = capsys.readouterr().out
    assert "tokenlens tokens --corpus" in out and "byte_fragment" in out


def test_bad_tokenizer_name(tmp_path: Path) -> None:
    args = _parser().parse_args(
        ["tokens", "--corpus", str(DATA), "--tokenizer", "nope", "--out", str(tmp_path)]
    )
    with pytest.raises(TokenlensError) as info:
        args.handler(args)
    assert "\n" not in str(info.value) and "unknown tokenizer 'nope'" in str(info.value)


def test_cli_prints_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["tokens", "--corpus", str(DATA), "--tokenizer", "nope", "--out", str(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("tokenlens: error: unknown tokenizer 'nope'") and err.count("\n") == 1


def test_missing_corpus(tmp_path: Path) -> None:
    with pytest.raises(TokenlensError, match="not found"):
        run_tokens_study(TokensConfig(corpus=tmp_path / "none.jsonl", out=tmp_path))
