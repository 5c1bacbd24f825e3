"""Capture overhead on a GPU, on a model of realistic size: traced vs untraced generates.

usage: python3 benchmarks/gpu_overhead.py OUT_JSON --shape {qwen2.5-1.5b,mimo-1.5b}
           [--pairs 7] [--prompts 64] [--max-tokens 256] [--tokenizer-from DIR]
           [--model DIR --prompts-file FILE.jsonl] [--batch N] [--aa] [--budget-s S]

One engine (vLLM's offline ``LLM``) with the tokenlens plugin recording into a temporary
trace directory; a Qwen2.5-1.5B-shaped config with ``load_format="dummy"`` (no weights
to carry: the step times are the real model's, the tokens are noise, ``ignore_eos`` keeps
every generate the same length). ``qwen2.5-1.5b`` drafts with n-gram k=3 (vLLM 0.25: the
V1 runner, synchronous scheduling: the scheduler hook on the critical path);
``mimo-1.5b`` is the same body as a MiMo model with one MTP layer, k=2 (Model Runner V2
with async scheduling: the scheduler hook and the runner hook).

Each pair generates the same prompts once traced and once untraced (the plugin's pause
file: a paused hook passes every step through, one time comparison per step), the order
alternating between pairs (traced-first, untraced-first, ...) so drifts hit both sides;
the pause file is looked up every 0.5 s, so each side waits 1.2 s after switching. The
ratio of a pair is traced tok/s / untraced tok/s (1.0: free). Writes OUT_JSON: every
generate, the per-pair ratios, their median, min, max and quartiles, and the hook's own
timing from its step lines (share of step time on the scheduler's thread).

``--model DIR`` runs real weights instead of the dummy shape (the speculative method of
``--shape``; the prompts' ``text`` from ``--prompts-file``). ``--batch N`` sends the
prompts N at a time (``--batch 1``: one request at a time, as a chat user does).
``--aa`` adds the A/A control: each round is one traced/untraced pair and one
untraced/untraced pair, so the spread between two identical sides of the same engine is
measured beside the traced ratio (the noise floor the traced ratio is read against).
``--budget-s`` stops starting new rounds when that many seconds have passed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

QWEN_1P5B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "vocab_size": 151936,
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "max_window_layers": 28,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": True,
    "use_sliding_window": False,
    "sliding_window": None,
    "attention_dropout": 0.0,
    "initializer_range": 0.02,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "torch_dtype": "bfloat16",
}
SHAPES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "qwen2.5-1.5b": (
        QWEN_1P5B,
        {
            "method": "ngram",
            "num_speculative_tokens": 3,
            "prompt_lookup_max": 4,
            "prompt_lookup_min": 1,
        },
    ),
    "mimo-1.5b": (
        {
            **QWEN_1P5B,
            "architectures": ["MiMoForCausalLM"],
            "tie_word_embeddings": False,
            "num_nextn_predict_layers": 1,
        },
        {"method": "mtp", "num_speculative_tokens": 2},
    ),
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")


def model_dir(shape: str, tokenizer_from: Path, root: Path) -> Path:
    """A model directory of ``shape``: config.json plus the tokenizer of ``tokenizer_from``."""
    out = root / shape
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(SHAPES[shape][0], indent=1))
    for name in TOKENIZER_FILES:
        if (tokenizer_from / name).is_file():
            shutil.copy(tokenizer_from / name, out / name)
    return out


def hook_timing(trace_dir: Path) -> dict[str, Any]:
    """The scheduler hook's self-timing over the recorded steps (docs/capture.md)."""
    lines = []
    for path in trace_dir.glob("steps-*.jsonl"):
        for raw in path.read_text().splitlines():
            if raw.endswith("}"):
                lines.append(json.loads(raw))
    timed = [(x["h"], x["w"]) for x in lines if x.get("w")]
    if not timed:
        return {"steps": 0}
    hook = sum(h for h, _ in timed)
    wall = sum(w for _, w in timed)
    return {
        "steps": len(timed),
        "hook_us_per_step": 1e6 * hook / len(timed),
        "median_hook_us": 1e6 * statistics.median(h for h, _ in timed),
        "median_step_ms": 1e3 * statistics.median(w for _, w in timed),
        "share": hook / wall,
        # the writer thread's seconds (serialising, building the records: off the
        # scheduler's thread, but it shares the GIL) as a share of the same wall time
        "writer_share": sum(x.get("wt") or 0.0 for x in lines) / wall,
        "runner_lines": sum(
            len(p.read_text().splitlines()) for p in trace_dir.glob("drafts-*.jsonl")
        ),
    }


def spread(ratios: list[float]) -> dict[str, Any]:
    """Median, range and quartiles of a list of ratios (None where too few)."""
    if not ratios:
        return {"pairs": 0, "median": None, "min": None, "max": None, "q1": None, "q3": None}
    quart = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [None, None, None]
    return {
        "pairs": len(ratios),
        "median": statistics.median(ratios),
        "min": min(ratios),
        "max": max(ratios),
        "q1": quart[0],
        "q3": quart[2],
        "ratios": ratios,
    }


def prompt_text(obj: dict[str, Any]) -> str:
    """A prompt line's text: ``text``, or the last user message of ``messages``."""
    if "text" in obj:
        return str(obj["text"])
    users = [m["content"] for m in obj.get("messages", []) if m.get("role") == "user"]
    return str(users[-1]) if users else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-1.5b")
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--tokenizer-from", type=Path)
    parser.add_argument("--model", type=Path, help="real weights (an HF directory)")
    parser.add_argument("--prompts-file", type=Path, help="JSONL prompts (text) for --model")
    parser.add_argument("--batch", type=int, default=0, help="prompts per generate (0: all)")
    parser.add_argument("--aa", action="store_true", help="add untraced/untraced pairs")
    parser.add_argument("--budget-s", type=float, default=0.0)
    args = parser.parse_args()
    if args.model is None and args.tokenizer_from is None:
        parser.error("--tokenizer-from is needed with the dummy shape (no --model)")
    started = time.perf_counter()

    work = Path(tempfile.mkdtemp(prefix="tl-overhead-"))
    trace_dir = work / "trace"
    trace_dir.mkdir()
    os.environ["TOKENLENS_TRACE_DIR"] = str(trace_dir)  # before vLLM loads its plugins
    if args.model is not None:
        model = args.model
    else:
        model = model_dir(args.shape, args.tokenizer_from, work)

    from vllm import LLM, SamplingParams

    spec = SHAPES[args.shape][1]
    llm = LLM(
        model=str(model),
        load_format="auto" if args.model is not None else "dummy",
        dtype="bfloat16",
        max_model_len=2048,
        gpu_memory_utilization=0.5,
        seed=0,
        disable_log_stats=False,
        speculative_config=dict(spec),  # vLLM fills in the dict it is given
    )
    config = llm.llm_engine.vllm_config
    facts = {
        "shape": args.shape,
        "model": str(args.model) if args.model is not None else "dummy",
        "batch": args.batch or args.prompts,
        "speculative_config": spec,
        "async_scheduling": bool(config.scheduler_config.async_scheduling),
        "v2_model_runner": bool(getattr(config, "use_v2_model_runner", False)),
    }
    print("engine", json.dumps(facts), flush=True)
    if args.prompts_file is not None:
        texts = [
            prompt_text(json.loads(line))
            for line in args.prompts_file.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        prompts = [texts[i % len(texts)] for i in range(args.prompts)]
    else:
        prompts = [
            f"Prompt {i}: the quick brown fox jumps over the lazy dog. " * 4
            for i in range(args.prompts)
        ]
    batch = args.batch or len(prompts)
    params = SamplingParams(max_tokens=args.max_tokens, temperature=0, ignore_eos=True)
    llm.generate(prompts[:8], SamplingParams(max_tokens=32, temperature=0), use_tqdm=False)
    pause = trace_dir / "paused"

    def timed(traced: bool) -> dict[str, Any]:
        if traced:
            pause.unlink(missing_ok=True)
        else:
            pause.write_text("1")
        time.sleep(1.2)  # past the hooks' 0.5 s pause look-up
        t = time.perf_counter()
        tokens = 0
        for b in range(0, len(prompts), batch):
            outs = llm.generate(prompts[b : b + batch], params, use_tqdm=False)
            tokens += sum(len(o.outputs[0].token_ids) for o in outs)
        seconds = time.perf_counter() - t
        return {"traced": traced, "seconds": seconds, "tokens": tokens, "tok_s": tokens / seconds}

    runs, ratios, aa_ratios = [], [], []
    for i in range(args.pairs):
        if args.budget_s and i >= 2 and time.perf_counter() - started > args.budget_s:
            print(json.dumps({"stopped": "budget", "pairs_done": i}), flush=True)
            break
        order = (True, False) if i % 2 == 0 else (False, True)
        pair = {traced: timed(traced) for traced in order}
        ratio = pair[True]["tok_s"] / pair[False]["tok_s"]
        ratios.append(ratio)
        for traced in order:
            runs.append({"pair": i, "kind": "traced/untraced", **pair[traced]})
        if args.aa:
            # two untraced sides; the ratio is always "side x / side y" with x the first
            # side on even rounds and the second on odd ones, so drifts cancel as above
            first, second = timed(False), timed(False)
            x, y = (first, second) if i % 2 == 0 else (second, first)
            aa_ratios.append(x["tok_s"] / y["tok_s"])
            runs.append({"pair": i, "kind": "aa", "side": "first", **first})
            runs.append({"pair": i, "kind": "aa", "side": "second", **second})
        print(
            json.dumps(
                {
                    "pair": i,
                    "traced_first": order[0],
                    "ratio": round(ratio, 4),
                    "traced_s": round(pair[True]["seconds"], 3),
                    "untraced_s": round(pair[False]["seconds"], 3),
                }
            ),
            flush=True,
        )
    pause.unlink(missing_ok=True)
    quart = statistics.quantiles(ratios, n=4) if len(ratios) >= 2 else [None, None, None]
    result = {
        **facts,
        "pairs": len(ratios),
        "aa": spread(aa_ratios) if args.aa else None,
        "prompts": args.prompts,
        "max_tokens": args.max_tokens,
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "ratio_q1": quart[0],
        "ratio_q3": quart[2],
        "ratios": ratios,
        "ratio_median_traced_first": statistics.median(ratios[0::2]),
        "ratio_median_untraced_first": statistics.median(ratios[1::2]) if len(ratios) > 1 else None,
        "hook": hook_timing(trace_dir),
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print("RESULT", json.dumps({k: v for k, v in result.items() if k != "runs"}), flush=True)


if __name__ == "__main__":
    main()
