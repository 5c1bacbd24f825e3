"""The target's own answers to the training prompts, with vLLM offline (no tracing).

Prompts are rendered as the tracer renders them (``prompts.render``: chat messages
through the target's chat template, raw text as is) and are sent as token ids, so the
ids written are exactly the context the drafter is trained on. Generation runs in
chunks, Japanese and English alternating inside each, until every language holds
``tokens`` answer tokens, the prompts run out, or the next chunk would pass the deadline
(its time estimated from the last chunk).
Each line of the output: ``id``, ``lang``, ``pair``, ``prompt_ids``, ``answer_ids``,
``finish_reason``. Held-out prompts (the manipulation check's, ``heldout``) are answered
first by the same engine, all of them, into their own file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .prompts import render


def interleave(prompts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Japanese and English prompts alternating, each language in its own order."""
    ja = [p for p in prompts if p["lang"] == "ja"]
    en = [p for p in prompts if p["lang"] == "en"]
    out: list[dict[str, Any]] = []
    for i in range(max(len(ja), len(en))):
        out += [x[i] for x in (ja, en) if i < len(x)]
    return out


def generate(
    prompts: list[dict[str, Any]],
    target: Path,
    out: Path,
    *,
    tokens: int,
    deadline: float,
    max_tokens: int = 256,
    chunk: int = 2048,
    engine: dict[str, Any] | None = None,
    log: Callable[[str], None] = print,
    heldout: tuple[list[dict[str, Any]], Path, int] | None = None,
) -> dict[str, Any]:
    """Write the answers to ``out`` (JSON lines); the generation's record."""
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    t0 = time.monotonic()
    tok = AutoTokenizer.from_pretrained(str(target))
    options = {
        "dtype": "bfloat16",
        "seed": 0,
        "max_model_len": 2048,
        "gpu_memory_utilization": 0.7,
        **(engine or {}),
    }
    llm = LLM(model=str(target), **options)
    start_s = time.monotonic() - t0
    log(f"generate: engine up in {start_s:.0f} s")
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, seed=0)
    held: dict[str, Any] | None = None
    if heldout is not None:
        h_prompts, h_out, h_max = heldout
        h_params = SamplingParams(temperature=0.0, max_tokens=h_max, seed=0)
        t = time.monotonic()
        with h_out.open("w", encoding="utf-8") as f:
            h_tok = _answer(llm, tok, h_prompts, h_params, f)
        held = {"prompts": len(h_prompts), "answer_tokens": h_tok, "max_tokens": h_max}
        log(f"generate: held-out {held} in {time.monotonic() - t:.0f} s")
    have = {"ja": 0, "en": 0}
    n_done = 0
    last_s = 0.0
    order = interleave(prompts)
    stop = "prompts exhausted"
    with out.open("w", encoding="utf-8") as f:
        for lo in range(0, len(order), chunk):
            if all(v >= tokens for v in have.values()):
                stop = "token target reached"
                break
            if time.monotonic() + 1.2 * last_s > deadline:
                stop = "deadline"
                break
            batch = [p for p in order[lo : lo + chunk] if have[p["lang"]] < tokens]
            t = time.monotonic()
            written = _answer(llm, tok, batch, params, f, have)
            last_s = time.monotonic() - t
            n_done += len(batch)
            log(
                f"generate: {n_done} prompts, {have} answer tokens; chunk "
                f"{sum(written.values()) / last_s:.0f} tok/s"
            )
    record = {
        "target": str(target),
        "engine": options,
        "sampling": {"temperature": 0.0, "max_tokens": max_tokens, "seed": 0},
        "prompts_generated": n_done,
        "answer_tokens": have,
        "stopped": stop,
        "engine_start_s": round(start_s, 1),
        "wall_s": round(time.monotonic() - t0, 1),
        "heldout": held,
    }
    del llm
    return record


def _answer(
    llm: Any,
    tok: Any,
    batch: list[dict[str, Any]],
    params: Any,
    f: Any,
    have: dict[str, int] | None = None,
) -> dict[str, int]:
    """Answer ``batch`` (chat template, token ids in), write one line per prompt to ``f``,
    add the answer tokens per language to ``have``; the tokens written per language."""
    ids = [render(tok, p) for p in batch]
    outs = llm.generate([{"prompt_token_ids": i} for i in ids], params, use_tqdm=False)
    written: dict[str, int] = {}
    for p, pid, o in zip(batch, ids, outs, strict=True):
        c = o.outputs[0]
        answer = list(c.token_ids)
        written[p["lang"]] = written.get(p["lang"], 0) + len(answer)
        if have is not None:
            have[p["lang"]] += len(answer)
        row = {
            "id": p["id"],
            "lang": p["lang"],
            "pair": p["pair"],
            "prompt_ids": list(pid),
            "answer_ids": answer,
            "finish_reason": c.finish_reason,
        }
        f.write(json.dumps(row) + "\n")
    return written
