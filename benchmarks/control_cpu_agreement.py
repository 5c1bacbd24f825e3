"""A small CPU measurement for the positive control (issue 32): does a short
Japanese-only fine-tune of the real 0.5B drafter on the 1.5B target's greedy answers
raise its next-token agreement with the target on held-out text?

Inputs: the target's greedy training answers from the H200 run
(``control-generations.jsonl.gz``: 4,480 pairs, bfloat16 vLLM) and the target's greedy
answers to the study's prompts from a committed control trace (``requests.parquet``).
Held out: the last ``--heldout-pairs`` pairs of the generation file (training-style
prompts never trained on here) and the first ``--study-pairs`` study pairs (the study's
own prompts: used here only to measure, never to train). Answers are cut to
``--answer-tokens``. The drafter trains on the front of the Japanese pool with
``finetune.train`` (the pipeline's code), is saved in bfloat16 as for vLLM, loaded again,
and measured with ``agreement.measure`` before and after (before: the original weights
rounded to bfloat16, the saved drafter's precision). Writes one JSON.

usage: python3 benchmarks/control_cpu_agreement.py --out FILE [options]
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from control_kit.agreement import measure, summarise
from control_kit.finetune import TrainConfig, train
from control_kit.mixing import Example, pack

ROOT = Path(__file__).resolve().parent.parent
MODELS = Path.home() / ".cache" / "tokenlens" / "models"


def read_generations(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def study_examples(
    run: Path, pairs: int, cut: int, *, others: bool = False
) -> tuple[list[Example], list[str]]:
    """The measured study pairs (spread over the domains), or with ``others`` every other
    study pair (the ``study`` training source)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(run / "requests.parquet").to_pylist()
    every = sorted({r["pair"] for r in rows})
    chosen = set(every[:: max(1, len(every) // pairs)][:pairs])  # spread over domains
    ex, names = [], []
    for r in sorted(rows, key=lambda r: (r["pair"], r["lang"] != "ja")):
        if (r["pair"] in chosen) != others:
            ex.append(
                Example(r["lang"], tuple(r["prompt_token_ids"]), tuple(r["output_token_ids"][:cut]))
            )
            names.append(r["pair"])
    return ex, names


def measure_dir(
    model_dir: Path, sets: dict[str, tuple[list[Example], list[str]]], bf16: bool = False
) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    if bf16:  # the precision a saved drafter has (and vLLM runs every drafter in)
        model = model.to(torch.bfloat16).to(torch.float32)
    out = {}
    for name, (ex, pairs) in sets.items():
        t = time.monotonic()
        out[name] = summarise(measure(model, ex, pairs, seq_len=512, rows=1))
        out[name]["seconds"] = round(time.monotonic() - t, 1)
        print(f"  {model_dir.name} {name}: {json.dumps(out[name])[:300]}", flush=True)
    del model
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--work", type=Path, default=Path("/tmp/ctrl-diag"))
    p.add_argument(
        "--generations", type=Path, default=Path("/tmp/ctrl-diag/control-generations.jsonl.gz")
    )
    p.add_argument("--run", type=Path, default=ROOT / "reports/gpu/control/runs/untuned")
    p.add_argument("--drafter", type=Path, default=MODELS / "qwen2.5-coder-0.5b-instruct")
    p.add_argument("--heldout-pairs", type=int, default=10)
    p.add_argument("--study-pairs", type=int, default=10)
    p.add_argument("--answer-tokens", type=int, default=64)
    p.add_argument("--train-examples", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--rows-per-step", type=int, default=2)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--train-source",
        choices=("generations", "study"),
        default="generations",
        help="study: train on the target's answers to the study pairs NOT measured (raw "
        "text for 54 of 60 pairs, as traced): a diagnosis of the rendering, never a "
        "pipeline step",
    )
    p.add_argument("--sets", default="heldout_training_style,study_prompts")
    p.add_argument("--before-from", type=Path, help="reuse a former output's before")
    a = p.parse_args()
    import torch

    torch.set_num_threads(a.threads)
    rows = read_generations(a.generations)
    held_pairs = {r["pair"] for r in rows[-2 * a.heldout_pairs :]}
    cut = a.answer_tokens
    held = [r for r in rows if r["pair"] in held_pairs]
    sets = {
        "heldout_training_style": (
            [
                Example(r["lang"], tuple(r["prompt_ids"]), tuple(r["answer_ids"][:cut]))
                for r in held
            ],
            [r["pair"] for r in held],
        ),
        "study_prompts": study_examples(a.run, a.study_pairs, cut),
    }
    sets = {k: v for k, v in sets.items() if k in a.sets.split(",")}
    train_rows = [r for r in rows if r["lang"] == "ja" and r["pair"] not in held_pairs]
    train_rows = train_rows[: a.train_examples]
    if a.train_source == "study":
        ex, _ = study_examples(a.run, a.study_pairs, a.seq_len, others=True)
        train_rows = [
            {"prompt_ids": e.prompt_ids, "answer_ids": e.answer_ids} for e in ex if e.lang == "ja"
        ][: a.train_examples]
    examples = [
        Example(
            "ja", tuple(r["prompt_ids"]), tuple(r["answer_ids"][: a.seq_len - len(r["prompt_ids"])])
        )
        for r in train_rows
        if len(r["prompt_ids"]) < a.seq_len - 8
    ]
    packed = pack(examples, a.seq_len, pad_id=0)
    record: dict[str, Any] = {
        "what": "real 0.5B drafter vs the 1.5B target's greedy answers (H200, bfloat16); "
        "CPU, float32",
        "sets": {k: {"examples": len(v[0]), "pairs": len(set(v[1]))} for k, v in sets.items()},
        "train": {
            "examples": len(examples),
            "answer_tokens": packed.tokens(),
            "rows": int(packed.input_ids.shape[0]),
        },
        "args": {k: str(v) for k, v in vars(a).items()},
    }
    print(json.dumps(record), flush=True)
    if a.before_from:
        before = json.loads(a.before_from.read_text(encoding="utf-8"))["before"]
        record["before"] = {k: v for k, v in before.items() if k in sets}
    else:
        record["before"] = measure_dir(a.drafter, sets, bf16=True)
    cfg = TrainConfig(
        lr=a.lr,
        rows_per_step=a.rows_per_step,
        micro_rows=1,
        seq_len=a.seq_len,
        save_dtype="bfloat16",
    )
    t = time.monotonic()
    rec = train(a.drafter, packed, a.work / "ja100-cpu", cfg)
    rec.pop("weights", None)
    record["training"] = {
        k: rec[k]
        for k in ("steps", "tokens_seen", "loss_curve", "config", "train_s", "packing_check")
    }
    print(f"trained {rec['steps']} steps in {time.monotonic() - t:.0f} s", flush=True)
    record["after"] = measure_dir(a.work / "ja100-cpu", sets)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
