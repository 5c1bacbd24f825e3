"""Prompt files: JSONL, one prompt per line (see docs/formats.md).

A prompt has a unique ``id``, a ``lang`` (BCP-47: ``ja``, ``en``, ...), and either
``text`` or chat ``messages``; optionally ``pair`` (shared by the parallel prompts of
each language), ``max_tokens`` and free ``tags``. Reading validates every line and
names the line and key of the first problem, so a bad corpus fails in one line.

Decoding is strict: invalid UTF-8, lone surrogates (also written as JSON escapes such
as ``"\\ud800"``) and duplicate keys are errors with the file and line, because a
prompt that cannot be encoded reaches vLLM's tokenizer only after a minute of engine
start, and a silently replaced character changes what the model was asked. Language
tags are normalised by :func:`normalise_lang`, the one function every stage uses, so
``ja``, ``JA`` and ``ja-JP`` are one language everywhere.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenlens.errors import TokenlensError

_LANG = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$")
_KNOWN_KEYS = {"id", "lang", "text", "messages", "pair", "max_tokens", "tags"}
SAMPLE_SEPARATOR = "#"
"""Separates a request id from its parallel-sample index (``<id>#<i>``): never in an id."""
_BOM = b"\xef\xbb\xbf"


def normalise_lang(lang: str | None) -> str:
    """Primary language subtag, lower case (``ja-JP``, ``JA``, ``ja_JP`` -> ``ja``).

    The one normalisation of language tags: prompt files, the tokens study, trace's
    ``--lang`` and analyze (for run directories written before tags were normalised)
    all group by it. Missing -> ``und`` (BCP-47's "undetermined").
    """
    if not lang:
        return "und"
    return lang.replace("_", "-").split("-")[0].lower()


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
        if not msg["role"].strip():
            raise _fail(path, lineno, f"'messages[{i}].role' must be a non-empty string")
        if not msg["content"].strip():
            raise _fail(path, lineno, f"'messages[{i}].content' must be a non-empty string")
        out.append({"role": msg["role"], "content": msg["content"]})
    return tuple(out)


def _bad_unicode(value: Any, where: str) -> str | None:
    """Where ``value`` holds a string that is not encodable Unicode (a lone surrogate)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"{where} holds a lone surrogate (U+{ord(value[exc.start]):04X})"
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            problem = _bad_unicode(key, f"a key of {where}") or _bad_unicode(
                item, f"'{key}'" if where == "the line" else f"{where}.{key}"
            )
            if problem:
                return problem
    if isinstance(value, list):
        for i, item in enumerate(value):
            problem = _bad_unicode(item, f"{where}[{i}]")
            if problem:
                return problem
    return None


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def parse_prompt(obj: Any, path: Path, lineno: int) -> Prompt:
    """Validate one decoded JSON line into a :class:`Prompt`."""
    if not isinstance(obj, dict):
        raise _fail(path, lineno, "each line must be a JSON object")
    unknown = sorted(set(obj) - _KNOWN_KEYS)
    if unknown:
        raise _fail(path, lineno, f"unknown key '{unknown[0]}' (known: {sorted(_KNOWN_KEYS)})")
    problem = _bad_unicode(obj, "the line")
    if problem:
        raise _fail(path, lineno, f"{problem}: text must be valid Unicode")
    pid = obj.get("id")
    if not isinstance(pid, str) or not pid.strip():
        raise _fail(path, lineno, "'id' must be a non-empty string")
    if SAMPLE_SEPARATOR in pid:
        raise _fail(
            path, lineno, f"'id' must not contain '{SAMPLE_SEPARATOR}' (it marks parallel samples)"
        )
    if any(unicodedata.category(c) == "Cc" for c in pid):
        raise _fail(path, lineno, "'id' must not contain control characters")
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
        lang=normalise_lang(lang),
        text=text,
        messages=parsed_messages,
        pair=pair,
        max_tokens=max_tokens,
        tags=obj.get("tags"),
    )


def _decode_line(raw: bytes, path: Path, lineno: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(
            path,
            lineno,
            f"invalid UTF-8 (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1} of the line); "
            "prompt files must be UTF-8",
        ) from None


def read_prompts(path: str | Path) -> list[Prompt]:
    """Read and validate a prompt file; ids must be unique."""
    p = Path(path)
    if not p.is_file():
        raise TokenlensError(f"prompt file not found: {p}")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise TokenlensError(f"cannot read prompt file {p}: {exc.strerror or exc}") from None
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    prompts: list[Prompt] = []
    seen: set[str] = set()
    # Lines are split on b"\n" only: str.splitlines would also split inside JSON strings
    # that hold U+2028 or a form feed, and misnumber every later line.
    for lineno, raw in enumerate(data.split(b"\n"), start=1):
        line = _decode_line(raw, p, lineno)
        if not line.strip():
            continue
        try:
            obj = json.loads(line, object_pairs_hook=_no_duplicate_keys)
            prompt = parse_prompt(obj, p, lineno)
        except _DuplicateKey as exc:
            raise _fail(p, lineno, f"duplicate key '{exc.key}'") from None
        except json.JSONDecodeError as exc:
            raise _fail(p, lineno, f"invalid JSON ({exc.msg})") from None
        except RecursionError:
            raise _fail(p, lineno, "invalid JSON (nested too deeply)") from None
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
