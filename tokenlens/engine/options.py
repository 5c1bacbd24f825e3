"""Engine options: a user's own vLLM engine arguments, checked before any engine starts.

``trace --engine-option KEY=VALUE`` and a bench plan's ``[[model]].engine`` table pass
vLLM engine arguments (quantization, tensor_parallel_size, gpu_memory_utilization,
max_num_seqs, compilation_config, ...) straight to ``vllm.LLM``. Each key is checked
against the installed vLLM's own ``EngineArgs`` (its dataclass fields, read from the
source with ``ast``: no vLLM import, no torch), so a typo fails in one line instead of
a minute into engine start. Keys that tokenlens sets from its own options are refused
with the option to use instead: the manifest and the signature are built from those.
"""

from __future__ import annotations

import ast
import difflib
import json
from pathlib import Path
from typing import Any

from tokenlens.engine.vllm_source import Reader, directory_reader, installed_root
from tokenlens.errors import TokenlensError

ARG_UTILS = "vllm/engine/arg_utils.py"
# Engine arguments tokenlens sets itself, and the trace option that sets each.
RESERVED: dict[str, str] = {
    "model": "--model",
    "tokenizer": "--tokenizer",
    "dtype": "--dtype",
    "max_model_len": "--max-model-len",
    "seed": "--seed",
    "load_format": "--load-format",
    "speculative_config": "--method, --k, --draft-model and --spec-option",
    "disable_log_stats": "nothing: tokenlens reads vLLM's counters, which need stats",
}


def parse_engine_options(items: list[str], flag: str = "--engine-option") -> dict[str, Any]:
    """``KEY=VALUE`` items -> a dict; VALUE is JSON where it parses (2, 0.9, true,
    {"level": 0}) and a string otherwise (fp8). A repeated key is refused."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise TokenlensError(f"{flag} expects KEY=VALUE, got {item!r}")
        if key in out:
            raise TokenlensError(f"{flag} {key} is given twice")
        try:
            out[key] = json.loads(value)
        except ValueError:
            out[key] = value
    return out


def engine_argument_names(read: Reader) -> frozenset[str] | None:
    """The fields of vLLM's ``EngineArgs`` dataclass in these sources (None: not found)."""
    text = read(ARG_UTILS)
    if text is None:
        return None
    for node in ast.parse(text).body:
        if isinstance(node, ast.ClassDef) and node.name == "EngineArgs":
            return frozenset(
                n.target.id
                for n in node.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            )
    return None


def installed_engine_arguments() -> frozenset[str] | None:
    """``EngineArgs``' fields of the installed vLLM, read without importing it."""
    root = installed_root()
    return None if root is None else engine_argument_names(directory_reader(Path(root)))


def check_engine_options(
    options: dict[str, Any],
    known: frozenset[str] | None,
    flag: str = "--engine-option",
    reserved: dict[str, str] | None = None,
) -> None:
    """Refuse, in one line, a key tokenlens sets itself or one vLLM's engine does not have.

    ``known`` None (no readable ``EngineArgs``): only the reserved keys are checked, and
    vLLM itself refuses an unknown key at engine start.
    """
    reserved = RESERVED if reserved is None else reserved
    for key in options:
        if key in reserved:
            raise TokenlensError(f"{flag} {key}: tokenlens sets it; use {reserved[key]}")
        if known is not None and key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise TokenlensError(
                f"{flag} {key}: not an argument of the installed vLLM's engine "
                f"(vllm.engine.arg_utils.EngineArgs){hint}"
            )


def options_label(options: dict[str, Any]) -> str:
    """``key=value,key=value`` (sorted, compact JSON values): the signature's ``engine``."""
    return ",".join(
        f"{k}={json.dumps(v, separators=(',', ':'), sort_keys=True).strip(chr(34))}"
        for k, v in sorted(options.items())
    )
