"""What a study costs on this machine: traced tok/s against concurrency, and replay.

Two tables (docs/development.md keeps the latest):

1. Traced output tokens per second against trace concurrency, the embedded pair with
   the 0.5B draft model at k=3 (the study's source trace), capture on, outputs of
   --max-tokens tokens. For each concurrency c, c prompts are generated twice in one
   engine: with ``max_tokens=1`` (prefill: the target's and the drafter's, plus one
   sampled token) and in full; decode time is the difference. Prefix caching is off
   in this engine so that the second generation prefills again (distinct prompts
   share no 128-token block here, so traces lose nothing by it).
2. Cells per hour at one concurrency, on the same --cells-prompts prompts: one real
   traced cell (``run_trace``, engine start included), then replays from it of both
   drafters at k=1..--sweep-k (one engine for the drafter, one for the target's
   look-ahead; also with --branch-drafts). The goal: the whole replayed sweep costs
   at most one traced cell + 25%.

Run it alone, under the vLLM lock; the figures depend on what else the machine runs:

    flock /tmp/tokenlens-vllm.lock python benchmarks/bench_throughput.py --work /tmp/tp
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenlens.engine.config import SamplingConfig
from tokenlens.engine.runner import Engine, jobs_from_prompts
from tokenlens.prompts import Prompt, read_prompts
from tokenlens.replay.run import ReplayConfig, run_replay
from tokenlens.trace import TraceConfig, build_engine_config, run_trace

REPO = Path(__file__).resolve().parent.parent
CORPORA = REPO / "corpora"


def study_prompts(max_tokens: int) -> list[Prompt]:
    """Every corpus pair, JA and EN alternating, each limited to ``max_tokens``."""
    pairs: dict[str, list[Prompt]] = {}
    for path in sorted(CORPORA.glob("*.jsonl")):
        if path.stem == "smoke":
            continue
        for p in read_prompts(path):
            pairs.setdefault(f"{path.stem}/{p.pair or p.id}", []).append(p)
    out = []
    for group in pairs.values():
        out += [replace(p, max_tokens=max_tokens) for p in sorted(group, key=lambda p: p.lang)]
    return out


def write_prompts(prompts: list[Prompt], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for p in prompts:
        # A chat prompt has messages and no text: writing "text": null made the file
        # unreadable, and the cells table (the only part that reads it) printed no rows.
        row: dict[str, Any] = {"id": p.id, "lang": p.lang, "pair": p.pair}
        if p.messages is not None:
            row["messages"] = [dict(m) for m in p.messages]
        else:
            row["text"] = p.text
        row["max_tokens"] = p.max_tokens
        lines.append(json.dumps(row, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def concurrency_sweep(args: argparse.Namespace, prompts: list[Prompt]) -> list[dict[str, Any]]:
    """Table 1: one engine; per level, prefill-only then full generation of c prompts."""
    trace_file = write_prompts(prompts, args.work / "sweep-prompts.jsonl")
    config = TraceConfig(
        prompts=trace_file,
        out=args.work / "sweep",
        method="draft_model",
        k=3,
        dtype="float32",
        max_model_len=4096,
    )
    capture = args.work / "sweep" / "capture"
    shutil.rmtree(capture, ignore_errors=True)
    econf = build_engine_config(config)
    econf = replace(
        econf,
        trace_dir=str(capture),
        extra={**econf.extra, "enable_prefix_caching": False},
        max_num_seqs=max(args.levels),
    )
    rows = []
    with Engine(econf, log_path=args.work / "sweep" / "engine.log") as engine:
        engine.generate(jobs_from_prompts(prompts[:2], cap=8), SamplingConfig(max_tokens=8), 2)
        for c in args.levels:
            chosen = prompts[:c]
            jobs = jobs_from_prompts(chosen)
            tag = [replace(j, request_id=f"c{c}p.{j.prompt_id}") for j in jobs]
            pre = engine.generate(
                [replace(j, max_tokens=1) for j in tag], SamplingConfig(max_tokens=1), c
            )
            full_jobs = [replace(j, request_id=f"c{c}f.{j.prompt_id}") for j in jobs]
            full = engine.generate(full_jobs, SamplingConfig(max_tokens=args.max_tokens), c)
            tokens = sum(len(r.output_token_ids) for r in full.requests)
            decode = full.wall_seconds - pre.wall_seconds
            rows.append(
                {
                    "concurrency": c,
                    "requests": len(chosen),
                    "output_tokens": tokens,
                    "wall_s": full.wall_seconds,
                    "tok_s": tokens / full.wall_seconds,
                    "prefill_s": pre.wall_seconds,
                    "decode_s": decode,
                    "decode_tok_s": (tokens - len(chosen)) / decode if decode > 0 else None,
                    "acceptance": full.counters.acceptance_rate,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def cells_per_hour(args: argparse.Namespace, prompts: list[Prompt]) -> list[dict[str, Any]]:
    """Table 2: a traced cell against replayed sweeps from it, on the same prompts."""
    chosen = prompts[: args.cells_prompts]
    trace_file = write_prompts(chosen, args.work / "cells-prompts.jsonl")
    source = args.work / "cells" / "draft_model-k3"
    t0 = time.perf_counter()
    run_trace(
        TraceConfig(
            prompts=trace_file,
            out=source,
            method="draft_model",
            k=3,
            sampling=SamplingConfig(max_tokens=args.max_tokens, logprobs=10),
            concurrency=args.cell_concurrency,
            dtype="float32",
            overwrite=True,
        )
    )
    traced = time.perf_counter() - t0
    tokens = json.loads((source / "manifest.json").read_text())["timing"]["output_tokens"]
    rows = [
        {
            "what": f"traced draft_model k=3 (concurrency {args.cell_concurrency})",
            "cells": 1,
            "wall_s": traced,
            "output_tokens": tokens,
        }
    ]
    ks = tuple(range(1, args.sweep_k + 1))
    for branch in (False, True):
        out = args.work / "cells" / ("replay-branch" if branch else "replay")
        t0 = time.perf_counter()
        result = run_replay(
            ReplayConfig(
                source=source,
                out=out,
                methods=("draft_model", "ngram"),
                ks=ks,
                branch_drafts=branch,
                overwrite=True,
            )
        )
        wall = time.perf_counter() - t0
        rows.append(
            {
                "what": f"replayed draft_model+ngram k=1..{args.sweep_k}"
                + (" with branch drafts" if branch else ""),
                "cells": len(result.runs),
                "wall_s": wall,
                "details": result.info,
            }
        )
    for row in rows:
        row["cells_per_hour"] = row["cells"] * 3600 / row["wall_s"]
        row["vs_one_traced_cell"] = row["wall_s"] / traced
        print(json.dumps(row, default=str), flush=True)
    return rows


def markdown(sweep: list[dict[str, Any]], cells: list[dict[str, Any]], args: Any) -> str:
    lines = [
        f"Traced draft_model k=3, float32, outputs of up to {args.max_tokens} tokens "
        "(shared machine):",
        "",
        "| concurrency | requests | output tokens | wall s | tok/s | prefill s | decode s "
        "| decode tok/s | acceptance |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sweep:
        dec = f"{r['decode_tok_s']:.2f}" if r["decode_tok_s"] else "–"
        acc = f"{r['acceptance']:.3f}" if r["acceptance"] is not None else "–"
        lines.append(
            f"| {r['concurrency']} | {r['requests']} | {r['output_tokens']} | {r['wall_s']:.0f} "
            f"| {r['tok_s']:.2f} | {r['prefill_s']:.0f} | {r['decode_s']:.0f} | {dec} | {acc} |"
        )
    lines += [
        "",
        f"Cells per hour on {args.cells_prompts} prompts (shared machine):",
        "",
        "| run | cells | wall s | cells per hour | wall / one traced cell |",
        "|---|---|---|---|---|",
    ]
    for r in cells:
        lines.append(
            f"| {r['what']} | {r['cells']} | {r['wall_s']:.0f} | {r['cells_per_hour']:.1f} "
            f"| {r['vs_one_traced_cell']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4, 8, 16, 32])
    parser.add_argument("--cells-prompts", type=int, default=32)
    parser.add_argument("--cell-concurrency", type=int, default=16)
    parser.add_argument("--sweep-k", type=int, default=8)
    parser.add_argument("--skip-sweep", action="store_true")
    parser.add_argument("--skip-cells", action="store_true")
    args = parser.parse_args()
    prompts = study_prompts(args.max_tokens)
    sweep = [] if args.skip_sweep else concurrency_sweep(args, prompts)
    cells = [] if args.skip_cells else cells_per_hour(args, prompts)
    text = markdown(sweep, cells, args)
    print(text)
    (args.work / "throughput.md").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
