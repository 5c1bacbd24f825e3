"""Where a speculative step's time goes: vLLM's own scopes under the torch profiler.

usage: python3 benchmarks/gpu_step_profile.py OUT_JSON --model DIR [--draft-model DIR]
           [--method draft_model] [--k 3] [--prompts-file FILE.jsonl] [--prompts 4]
           [--max-tokens 128] [--eager-drafter]

Plain vLLM (no tokenlens: run it with ``VLLM_PLUGINS=""``), the engine core in this
process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``) so that the profiler sees the model
runner, and vLLM's named scopes switched on (``VLLM_CUSTOM_SCOPES_FOR_PROFILING=1``:
"gpu_model_runner: forward", "... sample", "... draft", ...). One request at a time:
a warm-up, then ``--prompts`` timed generates (tokens per second, steps from vLLM's
counters, milliseconds per step), then the same prompts again under the profiler. Writes
OUT_JSON with the timings and the profiler's top operations and scopes by CPU and by
device time, and prints both tables. The answer to "why is a speculative step slow"
is in the scopes' shares: drafting vs the target's forward vs sampling vs bookkeeping.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from gpu_overhead import prompt_text  # the sibling script: one reader of prompt lines

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CUSTOM_SCOPES_FOR_PROFILING", "1")


def counters(llm: Any) -> dict[str, float]:
    """vLLM's spec-decode counters (drafts = verification steps with drafts)."""
    out: dict[str, float] = {}
    for metric in llm.get_metrics():
        name = getattr(metric, "name", "")
        if name in ("vllm:spec_decode_num_drafts", "vllm:generation_tokens"):
            out[name] = float(getattr(metric, "value", 0) or 0)
    return out


def rows(prof: Any, key: str, limit: int) -> list[dict[str, Any]]:
    """The profiler's top ``limit`` events by ``key`` as plain dicts (times in ms)."""
    events = sorted(prof.key_averages(), key=lambda e: getattr(e, key, 0.0), reverse=True)
    out = []
    for e in events[:limit]:
        out.append(
            {
                "name": e.key,
                "count": e.count,
                "cpu_total_ms": e.cpu_time_total / 1e3,
                "self_cpu_ms": e.self_cpu_time_total / 1e3,
                "device_total_ms": getattr(e, "device_time_total", 0.0) / 1e3,
                "self_device_ms": getattr(e, "self_device_time_total", 0.0) / 1e3,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--draft-model")
    parser.add_argument("--method", default="draft_model")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--prompts-file", type=Path)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--eager-drafter", action="store_true")
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()

    import torch
    from vllm import LLM, SamplingParams

    spec: dict[str, Any] | None = None
    if args.method != "none":
        spec = {"method": args.method, "num_speculative_tokens": args.k}
        if args.draft_model:
            spec["model"] = args.draft_model
        if args.eager_drafter:
            spec["enforce_eager"] = True
    llm = LLM(
        model=args.model,
        dtype=args.dtype,
        max_model_len=4096,
        gpu_memory_utilization=0.3,
        seed=0,
        disable_log_stats=False,
        speculative_config=spec,
    )
    texts = ["Explain how a hash map works."] * args.prompts
    if args.prompts_file is not None:
        lines = args.prompts_file.read_text(encoding="utf-8").splitlines()
        texts = [prompt_text(json.loads(x)) for x in lines if x.strip()]
        texts = texts[: args.prompts] or ["Explain how a hash map works."] * args.prompts
    params = SamplingParams(max_tokens=args.max_tokens, temperature=0, ignore_eos=True)
    llm.generate(texts[:1], SamplingParams(max_tokens=32, temperature=0), use_tqdm=False)

    before = counters(llm)
    t = time.perf_counter()
    tokens = 0
    for text in texts:  # one request at a time
        outs = llm.generate([text], params, use_tqdm=False)
        tokens += len(outs[0].outputs[0].token_ids)
    seconds = time.perf_counter() - t
    after = counters(llm)
    steps = after.get("vllm:spec_decode_num_drafts", 0) - before.get(
        "vllm:spec_decode_num_drafts", 0
    )
    timing = {
        "tokens": tokens,
        "seconds": seconds,
        "tok_s": tokens / seconds,
        "steps_with_drafts": steps or None,
        "ms_per_step": 1e3 * seconds / steps if steps else None,
        "ms_per_token": 1e3 * seconds / tokens,
    }
    print("TIMING", json.dumps(timing), flush=True)

    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for text in texts[:2]:
            llm.generate([text], params, use_tqdm=False)
    by_cpu = rows(prof, "cpu_time_total", 30)
    by_device = rows(prof, "self_device_time_total", 20)
    scopes = [r for r in rows(prof, "cpu_time_total", 400) if "gpu_model_runner" in r["name"]]
    for title, table in (("CPU", by_cpu), ("DEVICE", by_device), ("SCOPES", scopes)):
        print(f"== top by {title}")
        for r in table:
            print(
                f"{r['cpu_total_ms']:10.1f} cpu {r['device_total_ms']:10.1f} dev "
                f"{r['count']:7d}x  {r['name'][:90]}"
            )
    result = {
        "model": args.model,
        "draft_model": args.draft_model,
        "method": args.method,
        "k": args.k,
        "eager_drafter": args.eager_drafter,
        "speculative_config": spec,
        "vllm_config_cudagraph_mode": str(
            llm.llm_engine.vllm_config.compilation_config.cudagraph_mode
        ),
        "timing": timing,
        "profiled_prompts": min(2, len(texts)),
        "top_cpu": by_cpu,
        "top_device": by_device,
        "scopes": scopes,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # default=str: vLLM puts its own config objects into the speculative dict it is given
    # (a ModelConfig once broke this write and lost the run's figures, 2026-12-04)
    args.out.write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main()
