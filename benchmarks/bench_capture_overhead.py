"""Tracing overhead: the hook's own share of step time, next to the paired tok/s ratio.

One engine with the tokenlens hook installed; before each half of a repeat the hook is
switched on or off with its pause file (``<trace dir>/paused``: a paused hook passes
every step straight to vLLM, costing one time comparison per step). Each repeat
generates the same prompts hooked and unhooked, the order alternating between repeats
(off-first, on-first, ...), so drifts of the machine hit both sides; one engine means
no second engine's memory or idle OpenMP threads on the machine. (An earlier version
ran two engines side by side; on this shared 24 GiB machine the second one no longer
fits.) Prints, per repeat, tok/s of both sides, the ratio hooked / unhooked and the
load average, then the median ratio overall and per order, next to what the hook
measured itself from its step lines: its time on the scheduler's thread (and the
writer thread's) as a share of the step time.

``--control`` then runs as many repeats again with the hook paused on both sides (an
A/A test): the spread of those ratios is the noise floor of the end-to-end figure on
this machine.

    .venv/bin/python benchmarks/bench_capture_overhead.py [--repeats 8] [--max-tokens 32]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tokenlens.capture.events import Capture, build_capture
from tokenlens.capture.plugin import PAUSE_CHECK_SECONDS, PAUSE_FILE
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
    parser.add_argument("--dtype", default="float32", help="as the demo plans (default)")
    parser.add_argument("--control", action="store_true", help="also run A/A repeats")
    args = parser.parse_args()

    target, drafter = ensure_pair()
    prompts = read_prompts(corpora_dir() / "demo.jsonl")
    chosen = [p for p in prompts if p.lang == "ja"][: args.prompts]
    chosen += [p for p in prompts if p.lang == "en"][: args.prompts]
    jobs = jobs_from_prompts(chosen, cap=args.max_tokens)
    sampling = SamplingConfig(max_tokens=args.max_tokens)
    spec = SpeculativeSpec("draft_model", 3, model=str(drafter))
    with tempfile.TemporaryDirectory() as tmp:
        capture = Path(tmp) / "capture"
        capture.mkdir()
        pause = capture / PAUSE_FILE
        config = EngineConfig(
            model=str(target), speculative=spec, dtype=args.dtype, trace_dir=str(capture)
        )
        with Engine(config, log_path=f"{tmp}/engine.log") as engine:

            def side(hooked: bool) -> float:
                if hooked:
                    pause.unlink(missing_ok=True)
                else:
                    pause.touch()
                time.sleep(2 * PAUSE_CHECK_SECONDS)  # the hook looks again on its next step
                result = engine.generate(jobs, sampling)
                tokens = sum(len(r.output_token_ids) for r in result.requests)
                return tokens / result.wall_seconds

            side(True)  # warm-up, both paths
            side(False)
            warm = len(build_capture(capture).timing)  # warm-up steps do not count
            ratios = {
                mode: paired(side, args.repeats, control=mode == "control")
                for mode in (["hooked", "control"] if args.control else ["hooked"])
            }
            time.sleep(1.0)  # the writer thread flushes the last lines
            measured = Capture(timing=build_capture(capture).timing[warm:])
    cost = hook_cost(measured)
    for mode, by_order in ratios.items():
        report(mode, by_order)
    if cost["steps"]:
        print(
            f"hook share of step time: {100 * cost['share']:.4f} % on the scheduler's thread, "
            f"{100 * cost['share_with_writer']:.4f} % with the writer thread; "
            f"{cost['hook_us_per_step']:.1f} us per step over {cost['steps']} steps "
            f"(median per-step share {100 * cost['median_step_share']:.4f} %)"
        )


def paired(side: Callable[[bool], float], repeats: int, control: bool) -> dict[str, list[float]]:
    """Ratios on/off per order; in the control both sides run with the hook paused."""
    ratios: dict[str, list[float]] = {"off-first": [], "on-first": []}
    for rep in range(repeats):
        first = "off" if rep % 2 == 0 else "on"
        speed = {}
        for name in (first, "on" if first == "off" else "off"):
            speed[name] = side(name == "on" and not control)
        ratio = speed["on"] / speed["off"]
        ratios[f"{first}-first"].append(ratio)
        print(
            f"{'control' if control else 'hooked'} repeat {rep} ({first} first): "
            f"off {speed['off']:.3f} tok/s, on {speed['on']:.3f} tok/s, ratio {ratio:.4f}, "
            f"load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
    return ratios


def report(mode: str, ratios: dict[str, list[float]]) -> None:
    every = ratios["off-first"] + ratios["on-first"]
    label = "unhooked/unhooked (control, A/A)" if mode == "control" else "hooked/unhooked"
    print(f"median ratio {label}: {statistics.median(every):.4f} over {len(every)} repeats")
    print(f"  min {min(every):.4f}, max {max(every):.4f}")
    for order, values in ratios.items():
        print(f"  {order}: median {statistics.median(values):.4f} over {len(values)}")


if __name__ == "__main__":
    main()
