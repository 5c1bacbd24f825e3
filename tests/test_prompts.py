"""Prompt files: validation gives one-line errors naming the line and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenlens.errors import TokenlensError
from tokenlens.prompts import read_prompts


def write(tmp_path: Path, *objs: object) -> Path:
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(json.dumps(o, ensure_ascii=False) for o in objs) + "\n")
    return path


def test_reads_text_and_messages(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {"id": "a", "lang": "ja", "text": "こんにちは", "pair": "p1", "max_tokens": 8},
        {"id": "b", "lang": "en", "messages": [{"role": "user", "content": "hi"}], "pair": "p1"},
    )
    a, b = read_prompts(path)
    assert a.as_messages() == [{"role": "user", "content": "こんにちは"}]
    assert a.max_tokens == 8 and a.pair == "p1"
    assert b.as_messages() == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        ({"lang": "ja", "text": "x"}, "'id'"),
        ({"id": "a", "lang": "japanese!", "text": "x"}, "'lang'"),
        ({"id": "a", "lang": "ja"}, "exactly one of 'text' and 'messages'"),
        (
            {"id": "a", "lang": "ja", "text": "x", "messages": [{"role": "u", "content": "x"}]},
            "exactly one",
        ),
        ({"id": "a", "lang": "ja", "text": "x", "max_tokens": 0}, "'max_tokens'"),
        ({"id": "a", "lang": "ja", "text": "x", "colour": 1}, "unknown key 'colour'"),
        ({"id": "a", "lang": "ja", "messages": [{"role": "user"}]}, "messages[0]"),
    ],
)
def test_bad_lines_name_the_problem(tmp_path: Path, obj: dict[str, object], needle: str) -> None:
    path = write(tmp_path, obj)
    with pytest.raises(TokenlensError) as info:
        read_prompts(path)
    message = str(info.value)
    assert needle in message and f"{path}:1:" in message and "\n" not in message


def test_duplicate_ids_and_bad_json(tmp_path: Path) -> None:
    path = write(
        tmp_path, {"id": "a", "lang": "en", "text": "x"}, {"id": "a", "lang": "en", "text": "y"}
    )
    with pytest.raises(TokenlensError, match=r":2: duplicate id 'a'"):
        read_prompts(path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "lang": "en", "text": "x"}\n{oops\n')
    with pytest.raises(TokenlensError, match=r"bad.jsonl:2: invalid JSON"):
        read_prompts(bad)
    with pytest.raises(TokenlensError, match="prompt file not found"):
        read_prompts(tmp_path / "missing.jsonl")
