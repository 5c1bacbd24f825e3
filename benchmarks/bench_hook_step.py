"""The scheduler hook's cost per step at GPU batch sizes, on vLLM's real scheduler (no GPU).

On a GPU a scheduler step lasts milliseconds, so what the hook adds to
``update_from_output`` on the scheduler's thread is what a traced engine loses. This
drives vLLM's own ``Scheduler`` (the installed vLLM; :mod:`tokenlens.testing.scheduler`)
with a made-up model at a batch of B running requests, n-gram k=3, each step accepting
0..3 drafts, and times ``update_from_output`` itself, hooked and unhooked, in repeats
that alternate (hooked first, unhooked first, ...), each on a fresh scheduler with the
same requests. The model's part of a step (the GPU's) is absent, so the figures are the
scheduler's own cost and the hook's addition to it, per step and per request; the
hook's ``h`` (its own clock on the scheduler's thread, from its step lines) and the
writer thread's time are printed beside them.

    .venv/bin/python benchmarks/bench_hook_step.py [--batch 64 256] [--steps 120] [--repeats 4]

Compare with a GPU's step time to read the hook's share: e.g. 23 ms per step of a
Qwen2.5-1.5B-shaped model at batch 256, n-gram k=3, on an H200 (reports/gpu/README.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tokenlens.capture import plugin, recorder
from tokenlens.testing.scheduler import (
    BLOCK,
    Harness,
    K,
    make_scheduler,
    runner_output,
    tiny_vllm_config,
)

PROMPT = 20


def accept(rid: str, step: int) -> int:
    """0..K accepted drafts, varying by request and step (deterministic)."""
    return (hash(rid) + 7 * step) % (K + 1)


def run_once(
    config: Any, batch: int, steps: int, trace_dir: Path | None, model_s: float = 0.0
) -> dict[str, Any]:
    """One fresh scheduler, ``batch`` requests, ``steps`` decode steps; times each update.

    ``model_s``: the model's part of a step, spent in ``time.sleep`` (which, like a
    thread waiting for the GPU, lets the recorder's writer thread run).
    """
    from vllm.v1.outputs import DraftTokenIds

    if trace_dir is not None:
        problem = plugin.install(str(trace_dir))
        assert problem is None, problem
    try:
        blocks = batch * ((PROMPT + (steps + 2) * (K + 1)) // BLOCK + 2)
        h = Harness(make_scheduler(config, num_blocks=blocks), trace_dir or Path("."))
        for i in range(batch):
            h.add(f"r{i}-0123abcd", prompt=[100 + (i + j) % 50 for j in range(PROMPT)],
                  max_tokens=(steps + 2) * (K + 1))  # fmt: skip
        times, whole = [], []
        for step in range(steps + 8):
            t_step = time.perf_counter()
            out = h.schedule()
            if model_s:
                time.sleep(model_s)
            sampled = h.model(out, accept, step)
            ids = list(out.num_scheduled_tokens)
            output = runner_output(ids, sampled)
            t0 = time.perf_counter()
            h.sched.update_from_output(out, output)
            dt = time.perf_counter() - t0
            running = [r for r in ids if r in h.sched.requests]
            drafts = [[10 + (step + j) % 40 for j in range(K)] for _ in running]
            h.sched.update_draft_token_ids(DraftTokenIds(running, drafts))
            # the first steps prefill (chunked): count only full decode steps
            if len(sampled) == batch:
                times.append(dt)
                whole.append(time.perf_counter() - t_step)
    finally:
        if trace_dir is not None:
            plugin.flush()
            plugin.uninstall()
    return {"update_s": times[:steps], "step_s": whole[:steps]}


def hook_lines(trace_dir: Path) -> tuple[list[float], float]:
    """The hook's own seconds per step line (``h``) and the writer's seconds per line (``wt``)."""
    hook: list[float] = []
    writer = 0.0
    for path in trace_dir.glob("steps-*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            data = json.loads(line)
            if data.get("h") is not None:
                hook.append(float(data["h"]))
            writer += float(data.get("wt") or 0.0)
    return hook, writer / max(len(hook), 1)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--steps", type=int, default=120, help="decode steps per repeat")
    parser.add_argument("--repeats", type=int, default=4, help="hooked/unhooked pairs")
    parser.add_argument(
        "--model-ms",
        type=float,
        nargs="+",
        default=[0.0],
        help="the model's part of a step (sleep), one per batch or one for all; 0: none "
        "(the writer thread then competes with the scheduler for every step)",
    )
    parser.add_argument(
        "--writer-asleep",
        action="store_true",
        help="keep the recorder's writer thread asleep until each repeat ends: the hook's "
        "own clock then has no GIL waits for the writer in it",
    )
    args = parser.parse_args()
    if args.writer_asleep:
        recorder.WRITE_SECONDS = 3600.0

    with tempfile.TemporaryDirectory() as tmp:
        model_ms = args.model_ms * len(args.batch) if len(args.model_ms) == 1 else args.model_ms
        for batch, ms in zip(args.batch, model_ms, strict=True):
            config = tiny_vllm_config(
                Path(tmp) / f"model-{batch}",
                max_num_seqs=batch,
                max_num_batched_tokens=max(1024, batch * (K + 1)),
            )
            run_once(config, batch, 5, None)  # warm imports and caches
            hooked: list[float] = []
            plain: list[float] = []
            step_on: list[float] = []
            step_off: list[float] = []
            hook: list[float] = []
            writer: list[float] = []
            for r in range(args.repeats):
                order = (True, False) if r % 2 == 0 else (False, True)
                for traced in order:
                    trace_dir = Path(tmp) / f"trace-{batch}-{r}" if traced else None
                    got = run_once(config, batch, args.steps, trace_dir, ms / 1000)
                    (hooked if traced else plain).extend(got["update_s"])
                    (step_on if traced else step_off).extend(got["step_s"])
                    if trace_dir is not None:
                        h, x = hook_lines(trace_dir)
                        hook.extend(h)
                        writer.append(x)
            on = statistics.median(hooked) * 1e6
            off = statistics.median(plain) * 1e6
            own = statistics.median(hook) * 1e6 if hook else float("nan")
            wr = statistics.median(writer) * 1e6 if writer else float("nan")
            ratio = statistics.median(step_off) / statistics.median(step_on)
            print(
                f"batch {batch:4d}, model {ms:g} ms: update_from_output median "
                f"{off:8.0f} us unhooked, "
                f"{on:8.0f} us hooked (+{on - off:6.0f} us, {(on - off) / batch:5.2f} us per "
                f"request); hook's own clock {own:6.0f} us/step, writer thread {wr:6.0f} us/line "
                f"({len(hooked)} vs {len(plain)} steps); step time ratio unhooked/hooked "
                f"{ratio:.4f}"
            )


if __name__ == "__main__":
    main()
