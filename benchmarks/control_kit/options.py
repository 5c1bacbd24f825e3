"""The command line of benchmarks/positive_control.py (kept apart to keep the driver short)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def parser(
    doc: str | None, root: Path, shares_arg: Callable[[str], list[float]]
) -> argparse.ArgumentParser:
    """positive_control.py's options (``root``: the checkout; ``shares_arg``: --shares' type)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "stage",
        choices=(
            "prompts",
            "generate",
            "finetune",
            "prepare",
            "check",
            "trace",
            "analyze",
            "study",
        ),
    )
    p.add_argument("--work", type=Path, required=True, help="working directory (weights too)")
    p.add_argument("--budget-s", type=float, default=540.0, help="seconds this stage may take")
    p.add_argument("--target", type=Path, help="target model directory (generate)")
    p.add_argument("--drafter", type=Path, help="original drafter directory (finetune, trace)")
    p.add_argument("--shares", type=shares_arg, default=[0.0, 0.5, 1.0], help="default 0,0.5,1")
    p.add_argument(
        "--tokens",
        type=int,
        default=1_000_000,
        help="answer tokens per language to generate and per drafter to train on",
    )
    p.add_argument("--prompts-per-lang", type=int, default=10**6, help="default: all built")
    p.add_argument("--max-tokens", type=int, default=256, help="answer length (generate)")
    p.add_argument("--chunk", type=int, default=2048, help="prompts per generate call")
    p.add_argument("--gen-engine-option", action="append", default=[], metavar="KEY=JSON")
    p.add_argument("--again", action="store_true", help="generate again over a finished one")
    p.add_argument("--heldout-max-tokens", type=int, default=128, help="held-out answer length")
    p.add_argument(
        "--objective",
        choices=("ce", "kl"),
        default="kl",
        help="kl: distil the target's next-token distribution (the target runs beside the "
        "drafter); ce: its greedy tokens (the 2026-12-03 run)",
    )
    p.add_argument("--lr", type=float, default=2e-5, help="peak (5e-5 in the 2026-12-03 run)")
    p.add_argument(
        "--drafter-layers",
        type=int,
        default=0,
        help="finetune: keep only the drafter's first N decoder layers (a shallow drafter "
        "whose ability comes from the distillation; 0: all)",
    )
    p.add_argument("--rows-per-step", type=int, default=16)
    p.add_argument("--micro-rows", type=int, default=4, help="rows a forward (kl holds 2 logits)")
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--log-every", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--train-tok-s",
        type=float,
        default=40_000.0,
        help="expected training tokens/s, to reserve time for finetune",
    )
    p.add_argument("--commit", help="the code's commit where there is no .git")
    p.add_argument("--prompts", type=Path, default=root / "reports" / "full" / "prompts.jsonl")
    p.add_argument("--tl", default=f"{sys.executable} -m tokenlens", help="tokenlens command")
    p.add_argument(
        "--untuned",
        default="qwen2.5-coder-0.5b-instruct",
        help="the untuned drafter to trace as the reference: the embedded key "
        "(its manifest then names it as the study's did), a path, or none",
    )
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--cap-tokens", type=int, default=128)
    p.add_argument("--gpu-mem", type=float, default=0.15, help="gpu_memory_utilization per trace")
    p.add_argument(
        "--kv-cache-gb",
        type=float,
        default=8.0,
        help="KV cache per trace engine (skips vLLM's memory profiling, which "
        "parallel engines upset); 0: vLLM sizes it",
    )
    p.add_argument(
        "--eager",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="enforce_eager for generate and traces (no compile: starts in seconds, not minutes)",
    )
    p.add_argument("--trace-engine-option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--trace-extra", default="", help="more `tokenlens trace` options (a string)")
    p.add_argument("--stagger-s", type=float, default=3.0, help="seconds between trace starts")
    p.add_argument("--jobs", type=int, default=2, help="analyses at once")
    p.add_argument("--out", type=Path, help="study: also write study.json here")
    p.add_argument(
        "--check-margin",
        type=float,
        default=0.02,
        help="check: the JA agreement and JA-EN gap differences it requires (default δ)",
    )
    p.add_argument("--check-rows", type=int, default=8, help="check: packed rows a forward")
    return p
