"""Prompt files: JSONL, one prompt per line (see docs/formats.md).

A prompt has a unique ``id``, a ``lang`` (BCP-47: ``ja``, ``en``, ...), and either
``text`` or chat ``messages``; optionally ``pair`` (shared by the parallel prompts of
each language), ``max_tokens`` and free ``tags``. Reading validates every line and
names the line and key of the first problem, so a bad corpus fails in one line.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenlens.errors import TokenlensError

_LANG = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$")
_KNOWN_KEYS = {"id", "lang", "text", "messages", "pair", "max_tokens", "tags"}


@dataclass(frozen=True)
class Prompt:
    """One prompt of a corpus. Exactly one of ``text`` and ``messages`` is set."""

    id: str
    lang: str
    text: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    pair: str | None = None
    max_tokens: int | None = None
    tags: dict[str, Any] | list[Any] | None = field(default=None, compare=False)

    def as_messages(self) -> list[dict[str, str]]:
        """The prompt as chat messages (a plain ``text`` becomes one user turn)."""
        if self.messages is not None:
            return [dict(m) for m in self.messages]
        return [{"role": "user", "content": self.text or ""}]


def _fail(path: Path, lineno: int, message: str) -> TokenlensError:
    return TokenlensError(f"{path}:{lineno}: {message}")


def _parse_messages(path: Path, lineno: int, value: Any) -> tuple[dict[str, str], ...]:
    if not isinstance(value, list) or not value:
        raise _fail(path, lineno, "'messages' must be a non-empty list of {role, content}")
    out = []
    for i, msg in enumerate(value):
        if (
            not isinstance(msg, dict)
            or not isinstance(msg.get("role"), str)
            or not isinstance(msg.get("content"), str)
        ):
            raise _fail(path, lineno, f"'messages[{i}]' must have string 'role' and 'content'")
        out.append({"role": msg["role"], "content": msg["content"]})
    return tuple(out)


def parse_prompt(obj: Any, path: Path, lineno: int) -> Prompt:
    """Validate one decoded JSON line into a :class:`Prompt`."""
    if not isinstance(obj, dict):
        raise _fail(path, lineno, "each line must be a JSON object")
    unknown = sorted(set(obj) - _KNOWN_KEYS)
    if unknown:
        raise _fail(path, lineno, f"unknown key '{unknown[0]}' (known: {sorted(_KNOWN_KEYS)})")
    pid = obj.get("id")
    if not isinstance(pid, str) or not pid:
        raise _fail(path, lineno, "'id' must be a non-empty string")
    lang = obj.get("lang")
    if not isinstance(lang, str) or not _LANG.match(lang):
        raise _fail(path, lineno, f"'lang' must be a BCP-47 tag like 'ja' or 'en', got {lang!r}")
    text = obj.get("text")
    messages = obj.get("messages")
    if (text is None) == (messages is None):
        raise _fail(path, lineno, "exactly one of 'text' and 'messages' is required")
    if text is not None and (not isinstance(text, str) or not text.strip()):
        raise _fail(path, lineno, "'text' must be a non-empty string")
    parsed_messages = _parse_messages(path, lineno, messages) if messages is not None else None
    pair = obj.get("pair")
    if pair is not None and not isinstance(pair, str):
        raise _fail(path, lineno, "'pair' must be a string")
    max_tokens = obj.get("max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise _fail(path, lineno, "'max_tokens' must be a positive integer")
    return Prompt(
        id=pid,
        lang=lang,
        text=text,
        messages=parsed_messages,
        pair=pair,
        max_tokens=max_tokens,
        tags=obj.get("tags"),
    )


def read_prompts(path: str | Path) -> list[Prompt]:
    """Read and validate a prompt file; ids must be unique."""
    p = Path(path)
    if not p.is_file():
        raise TokenlensError(f"prompt file not found: {p}")
    prompts: list[Prompt] = []
    seen: set[str] = set()
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise _fail(p, lineno, f"invalid JSON ({exc.msg})") from None
            prompt = parse_prompt(obj, p, lineno)
            if prompt.id in seen:
                raise _fail(p, lineno, f"duplicate id {prompt.id!r}")
            seen.add(prompt.id)
            prompts.append(prompt)
    if not prompts:
        raise TokenlensError(f"prompt file has no prompts: {p}")
    return prompts


def corpus_hash(path: str | Path) -> str:
    """SHA-256 of the prompt file's bytes: part of every run's signature."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
