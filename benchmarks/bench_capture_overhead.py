"""Tracing overhead: tok/s with the capture plugin on vs off, paired and repeated.

Two engines with the same model, drafter and k run side by side (only one generates
at a time); each repeat generates the same prompts on both, in alternating order, so
drifts of the machine hit both sides. Prints per-repeat tok/s and the median ratio
traced / untraced (goal >= 0.99).

    .venv/bin/python benchmarks/bench_capture_overhead.py [--repeats 5] [--max-tokens 48]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from tokenlens.engine.config import EngineConfig, SamplingConfig, SpeculativeSpec
from tokenlens.engine.runner import Engine, jobs_from_prompts
from tokenlens.models.embedded import ensure_pair
from tokenlens.prompts import read_prompts

CORPUS = Path(__file__).resolve().parent.parent / "corpora" / "demo.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--prompts", type=int, default=2, help="prompts per language")
    args = parser.parse_args()

    target, drafter = ensure_pair()
    prompts = read_prompts(CORPUS)
    chosen = [p for p in prompts if p.lang == "ja"][: args.prompts]
    chosen += [p for p in prompts if p.lang == "en"][: args.prompts]
    jobs = jobs_from_prompts(chosen, cap=args.max_tokens)
    sampling = SamplingConfig(max_tokens=args.max_tokens)
    spec = SpeculativeSpec("draft_model", 3, model=str(drafter))
    with tempfile.TemporaryDirectory() as tmp:
        base = EngineConfig(model=str(target), speculative=spec)
        traced = EngineConfig(model=str(target), speculative=spec, trace_dir=f"{tmp}/capture")
        with (
            Engine(base, log_path=f"{tmp}/off.log") as off,
            Engine(traced, log_path=f"{tmp}/on.log") as on,
        ):
            for engine in (off, on):  # warm-up
                engine.generate(jobs[:1], SamplingConfig(max_tokens=8))
            ratios = []
            for rep in range(args.repeats):
                order = [("off", off), ("on", on)] if rep % 2 == 0 else [("on", on), ("off", off)]
                speed = {}
                for name, engine in order:
                    result = engine.generate(jobs, sampling)
                    tokens = sum(len(r.output_token_ids) for r in result.requests)
                    speed[name] = tokens / result.wall_seconds
                ratios.append(speed["on"] / speed["off"])
                on_s, off_s, ratio = speed["on"], speed["off"], ratios[-1]
                print(
                    f"repeat {rep}: off {off_s:.3f} tok/s, on {on_s:.3f} tok/s, ratio {ratio:.4f}"
                )
        steps = sum(1 for f in Path(f"{tmp}/capture").glob("steps-*.jsonl") for _ in f.open())
    print(
        f"median ratio traced/untraced: {statistics.median(ratios):.4f} over {len(ratios)} repeats"
    )
    print(f"min {min(ratios):.4f}, max {max(ratios):.4f}; step lines recorded: {steps}")


if __name__ == "__main__":
    main()
