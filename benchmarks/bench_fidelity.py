"""Fidelity of bench's tok/s: tokenlens's measurement vs timing vLLM's generate directly.

One vLLM engine (the embedded 1.5B target, optionally with the 0.5B drafter), one
process. Each repeat generates the same prompts, one request at a time, two ways in
alternating order: (a) through ``tokenlens.engine.worker.generate`` — the code path
``tokenlens bench`` times (our request loop, counters read around it) — using the
wall time it reports; (b) ``LLM.generate`` on one prompt at a time, wrapped in
``time.perf_counter()``. Prints tok/s of both per repeat, the median ratio a/b
(goal 1.00 +- 0.03) and the coefficient of variation of each side's repeats.

    .venv/bin/python benchmarks/bench_fidelity.py [--repeats 5] [--max-tokens 32] [--method none]
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenlens.engine.config import EngineConfig, SamplingConfig, SpeculativeSpec
from tokenlens.engine.runner import jobs_from_prompts
from tokenlens.engine.worker import build_llm, cpu_thread_env, generate, render_prompt
from tokenlens.models.embedded import ensure_pair
from tokenlens.prompts import read_prompts

CORPUS = Path(__file__).resolve().parent.parent / "corpora" / "demo.jsonl"


def cv(values: list[float]) -> float:
    return statistics.pstdev(values) / statistics.fmean(values)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--prompts", type=int, default=1, help="prompts per language")
    parser.add_argument("--method", choices=["none", "draft_model"], default="none")
    args = parser.parse_args()

    import os

    for key, value in cpu_thread_env().items():
        os.environ.setdefault(key, value)
    from vllm import SamplingParams

    target, drafter = ensure_pair()
    prompts = read_prompts(CORPUS)
    chosen = [p for p in prompts if p.lang == "ja"][: args.prompts]
    chosen += [p for p in prompts if p.lang == "en"][: args.prompts]
    jobs = jobs_from_prompts(chosen, cap=args.max_tokens)
    sampling = SamplingConfig(max_tokens=args.max_tokens)
    spec = SpeculativeSpec("draft_model", 3, model=str(drafter)) if args.method != "none" else None
    config = EngineConfig(model=str(target), speculative=spec)
    llm = build_llm(config)
    tokenizer = llm.get_tokenizer()
    # The prompts exactly as the worker renders them (chat template, no special tokens).
    rendered = [{"prompt_token_ids": render_prompt(tokenizer, job, {})} for job in jobs]
    params = [SamplingParams(**sampling.to_vllm(job.max_tokens)) for job in jobs]

    def ours(rep: int) -> float:
        tagged = [replace(job, request_id=f"r{rep}-{job.prompt_id}") for job in jobs]
        result = generate(llm, config, tagged, sampling, 1)
        return sum(len(r.output_token_ids) for r in result.requests) / result.wall_seconds

    def direct(rep: int) -> float:
        tokens = 0
        t0 = time.perf_counter()
        for prompt, param in zip(rendered, params, strict=True):
            out: Any = llm.generate([prompt], param, use_tqdm=False)
            tokens += len(out[0].outputs[0].token_ids)
        return tokens / (time.perf_counter() - t0)

    ours(-1), direct(-1)  # warm-up
    a, b = [], []
    for rep in range(args.repeats):
        sides = [(ours, a), (direct, b)] if rep % 2 == 0 else [(direct, b), (ours, a)]
        for fn, sink in sides:
            sink.append(fn(rep))
        print(
            f"repeat {rep}: tokenlens {a[-1]:.3f} tok/s, direct {b[-1]:.3f} tok/s,"
            f" ratio {a[-1] / b[-1]:.4f}"
        )
    ratios = [x / y for x, y in zip(a, b, strict=True)]
    print(
        f"method {args.method}, {len(jobs)} prompts x {args.max_tokens} tokens,"
        f" {args.repeats} repeats"
    )
    print(f"median ratio tokenlens/direct: {statistics.median(ratios):.4f} (goal 1.00 +- 0.03)")
    print(f"median tok/s: tokenlens {statistics.median(a):.3f}, direct {statistics.median(b):.3f}")
    print(f"coefficient of variation of repeats: tokenlens {cv(a):.4f}, direct {cv(b):.4f}")


if __name__ == "__main__":
    main()
