"""Tracing overhead: the hook's own share of step time, next to the paired tok/s ratio.

Two engines with the same model, drafter and k run side by side (only one generates
at a time); each repeat generates the same prompts on both, the order alternating
between repeats (off-first, on-first, ...), so drifts of the machine hit both sides.
Prints, per repeat, tok/s of both and the ratio traced / untraced, the machine's load
average, and at the end the median ratio overall and per order, next to what the hook
measured itself: its time on the scheduler's thread (and the writer thread's) as a
share of the step time, from the step lines of the traced engine.

``--control`` runs the same design with tracing off on both engines (an A/A test):
the spread of its ratios is the noise floor of the end-to-end figure on this machine.

    .venv/bin/python benchmarks/bench_capture_overhead.py [--repeats 8] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

from tokenlens.capture.events import build_capture
from tokenlens.capture.summary import hook_cost
from tokenlens.engine.config import EngineConfig, SamplingConfig, SpeculativeSpec
from tokenlens.engine.runner import Engine, jobs_from_prompts
from tokenlens.models.embedded import ensure_pair
from tokenlens.packaged import corpora_dir
from tokenlens.prompts import read_prompts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=8, help="paired repeats (>= 7)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--prompts", type=int, default=1, help="prompts per language")
    # auto (bf16): two float32 pairs side by side would need ~20 GiB
    parser.add_argument("--dtype", default="auto", help="vLLM dtype (default: auto)")
    parser.add_argument("--control", action="store_true", help="A/A: tracing off on both")
    args = parser.parse_args()

    target, drafter = ensure_pair()
    prompts = read_prompts(corpora_dir() / "demo.jsonl")
    chosen = [p for p in prompts if p.lang == "ja"][: args.prompts]
    chosen += [p for p in prompts if p.lang == "en"][: args.prompts]
    jobs = jobs_from_prompts(chosen, cap=args.max_tokens)
    sampling = SamplingConfig(max_tokens=args.max_tokens)
    spec = SpeculativeSpec("draft_model", 3, model=str(drafter))
    with tempfile.TemporaryDirectory() as tmp:
        capture = None if args.control else f"{tmp}/capture"
        base = EngineConfig(model=str(target), speculative=spec, dtype=args.dtype)
        traced = EngineConfig(
            model=str(target), speculative=spec, dtype=args.dtype, trace_dir=capture
        )
        with (
            Engine(base, log_path=f"{tmp}/off.log") as off,
            Engine(traced, log_path=f"{tmp}/on.log") as on,
        ):
            for engine in (off, on):  # warm-up
                engine.generate(jobs[:1], SamplingConfig(max_tokens=8))
            ratios: dict[str, list[float]] = {"off-first": [], "on-first": []}
            for rep in range(args.repeats):
                first = "off" if rep % 2 == 0 else "on"
                order = [("off", off), ("on", on)] if first == "off" else [("on", on), ("off", off)]
                speed = {}
                for name, engine in order:
                    result = engine.generate(jobs, sampling)
                    tokens = sum(len(r.output_token_ids) for r in result.requests)
                    speed[name] = tokens / result.wall_seconds
                ratio = speed["on"] / speed["off"]
                ratios[f"{first}-first"].append(ratio)
                load = os.getloadavg()[0]
                print(
                    f"repeat {rep} ({first} first): off {speed['off']:.3f} tok/s, "
                    f"on {speed['on']:.3f} tok/s, ratio {ratio:.4f}, load {load:.2f}",
                    flush=True,
                )
        cost = hook_cost(build_capture(Path(capture))) if capture is not None else None
    every = ratios["off-first"] + ratios["on-first"]
    label = "untraced/untraced (control)" if args.control else "traced/untraced"
    print(f"median ratio {label}: {statistics.median(every):.4f} over {len(every)} repeats")
    print(f"min {min(every):.4f}, max {max(every):.4f}")
    for order, values in ratios.items():
        if values:
            print(f"  {order}: median {statistics.median(values):.4f} over {len(values)}")
    if cost is not None and cost["steps"]:
        print(
            f"hook share of step time: {100 * cost['share']:.4f} % on the scheduler's thread, "
            f"{100 * cost['share_with_writer']:.4f} % with the writer thread; "
            f"{cost['hook_us_per_step']:.1f} us per step over {cost['steps']} steps "
            f"(median per-step share {100 * cost['median_step_share']:.4f} %)"
        )


if __name__ == "__main__":
    main()
