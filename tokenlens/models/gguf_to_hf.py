"""Dequantize a Qwen2 GGUF into a Hugging Face model directory that vLLM loads.

transformers can run a GGUF but keeps it quantized and cannot save it; vLLM's own GGUF
path is GPU-oriented. So we dequantize every tensor to float32 with the ``gguf``
package (the reference implementation of the GGML formats), rename it to the Hugging
Face Qwen2 layout and stream it into ``model.safetensors`` one tensor at a time (peak
memory: the largest tensor, not the model). The tokenizer and chat template come from
the GGUF's own metadata through transformers' GGUF tokenizer converter.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from tokenlens.errors import TokenlensError
from tokenlens.progress import SILENT, Progress

_LAYER_MAP = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
_GLOBAL_MAP = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_BLOCK = re.compile(r"^blk\.(\d+)\.(.+)$")


def hf_name(gguf_name: str) -> str:
    """Map a llama.cpp tensor name to its Hugging Face Qwen2 name."""
    if gguf_name in _GLOBAL_MAP:
        return _GLOBAL_MAP[gguf_name]
    match = _BLOCK.match(gguf_name)
    if match and match.group(2) in _LAYER_MAP:
        return f"model.layers.{match.group(1)}.{_LAYER_MAP[match.group(2)]}"
    raise TokenlensError(f"unknown GGUF tensor {gguf_name!r}: not a Qwen2 layout")


def _field(reader: Any, key: str) -> Any:
    field = reader.fields.get(key)
    if field is None:
        raise TokenlensError(f"GGUF metadata lacks {key!r}")
    return field.contents()


def qwen2_config(reader: Any) -> dict[str, Any]:
    """A transformers/vLLM ``config.json`` for the Qwen2 model described by the GGUF."""
    if _field(reader, "general.architecture") != "qwen2":
        raise TokenlensError("only GGUF files of architecture 'qwen2' can be converted")
    names = {t.name for t in reader.tensors}
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    layers = int(_field(reader, "qwen2.block_count"))
    rope_theta = float(_field(reader, "qwen2.rope.freq_base"))
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": int(_field(reader, "qwen2.embedding_length")),
        "intermediate_size": int(_field(reader, "qwen2.feed_forward_length")),
        "num_hidden_layers": layers,
        "num_attention_heads": int(_field(reader, "qwen2.attention.head_count")),
        "num_key_value_heads": int(_field(reader, "qwen2.attention.head_count_kv")),
        "max_position_embeddings": int(_field(reader, "qwen2.context_length")),
        "max_window_layers": layers,
        "rms_norm_eps": float(_field(reader, "qwen2.attention.layer_norm_rms_epsilon")),
        "rope_theta": rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": rope_theta},
        "vocab_size": int(embd.shape[1]),
        "hidden_act": "silu",
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "use_sliding_window": False,
        "sliding_window": None,
        "tie_word_embeddings": "output.weight" not in names,
        "bos_token_id": int(_field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(_field(reader, "tokenizer.ggml.eos_token_id")),
        "torch_dtype": "float32",
        "dtype": "float32",
    }


def _tensors(reader: Any) -> Iterator[tuple[str, Any]]:
    for tensor in reader.tensors:
        yield hf_name(tensor.name), tensor


def write_safetensors(reader: Any, path: Path, label: str, progress: Progress = SILENT) -> None:
    """Stream all tensors, dequantized to float32, into one safetensors file."""
    from gguf.quants import dequantize

    entries: list[tuple[str, Any, list[int]]] = []
    header: dict[str, Any] = {"__metadata__": {"format": "pt", "source": "gguf"}}
    offset = 0
    for name, tensor in _tensors(reader):
        shape = [int(d) for d in reversed(tensor.shape.tolist())]
        nbytes = int(np.prod(shape)) * 4
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + nbytes]}
        entries.append((name, tensor, shape))
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # align tensor data to 8 bytes
    progress.stage(f"dequantize {label}", total=len(entries), unit="tensor")
    with path.open("wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for name, tensor, shape in entries:
            array = np.ascontiguousarray(dequantize(tensor.data, tensor.tensor_type), dtype="<f4")
            if list(array.shape) != shape:
                raise TokenlensError(f"{name}: dequantized shape {array.shape} != {shape}")
            fh.write(array.tobytes())
            progress.advance()


def write_tokenizer(gguf_path: Path, out_dir: Path) -> None:
    """Tokenizer files and chat template, converted by transformers from the GGUF."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    if not getattr(tok, "chat_template", None):
        raise TokenlensError(f"{gguf_path.name}: the GGUF carries no chat template")
    tok.save_pretrained(str(out_dir))


def convert(gguf_path: Path, out_dir: Path, progress: Progress = SILENT) -> None:
    """Write config, generation config, tokenizer and float32 weights into ``out_dir``."""
    from gguf import GGUFReader

    reader = GGUFReader(str(gguf_path))
    config = qwen2_config(reader)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    pad = reader.fields.get("tokenizer.ggml.padding_token_id")
    generation = {
        # Only token ids: the GGUF does not carry sampling defaults, and tokenlens
        # always sets its sampling explicitly.
        "bos_token_id": config["bos_token_id"],
        "eos_token_id": config["eos_token_id"],
        "pad_token_id": int(pad.contents()) if pad is not None else config["eos_token_id"],
    }
    (out_dir / "generation_config.json").write_text(json.dumps(generation, indent=2) + "\n")
    write_tokenizer(gguf_path, out_dir)
    write_safetensors(reader, out_dir / "model.safetensors", gguf_path.stem, progress)
