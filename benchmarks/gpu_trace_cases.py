"""Trace the GPU evidence cases through tokenlens' Python API (as ``tokenlens trace`` would).

usage: python3 benchmarks/gpu_trace_cases.py OUTROOT CASE [CASE ...]

Written for the offline H200 host (vLLM 0.25.0, the tiny dummy-weight models installed by
the GPU bundle: TOKENLENS_CACHE names their cache). Each case is one run directory
``OUTROOT/<case>/``; ``OUTROOT/summary.jsonl`` gets one line per case: the manifest's
engine facts, vLLM's counters, the reconciliation, the capture's draft-id and hook
figures, and any error. A case that fails is recorded and the next one runs.

Cases: the runners vLLM 0.25 picks by default on a GPU (n-gram and draft model on V1,
which V2 refuses there; MTP and D-Flash on V2), with async scheduling as vLLM sets it
and forced off. Tiny models make every number except the reconciliation and the draft
ids meaningless: they prove the capture, not acceptance.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from tokenlens.engine.config import SamplingConfig
from tokenlens.packaged import corpora_dir
from tokenlens.progress import SILENT
from tokenlens.trace import TraceConfig, run_trace

PROMPTS = Path(os.environ.get("TL_PROMPTS", str(corpora_dir() / "demo.jsonl")))
MAX_TOKENS = int(os.environ.get("TL_MAXTOK", "64"))
PER_LANG = int(os.environ.get("TL_LIMIT", "3"))

SYNC = {"async_scheduling": False}
CASES: dict[str, tuple[dict[str, str], dict[str, Any]]] = {
    # name: (environment, TraceConfig keywords)
    "v1_ngram_k3": ({}, {"model": "tiny-qwen3", "method": "ngram", "k": 3}),
    "v1_draft_model_k3": (
        {},
        {"model": "tiny-qwen3", "method": "draft_model", "draft_model": "tiny-qwen3", "k": 3},
    ),
    "v2_mtp_k2_async": ({}, {"model": "tiny-mimo-mtp", "method": "mtp", "k": 2}),
    "v2_mtp_k2_sync": ({}, {"model": "tiny-mimo-mtp", "method": "mtp", "k": 2, "engine": SYNC}),
    "v2_dflash_k3_async": (
        {},
        {"model": "tiny-qwen3", "method": "dflash", "draft_model": "tiny-qwen3-dflash", "k": 3},
    ),
    "v2_dflash_k3_sync": (
        {},
        {
            "model": "tiny-qwen3",
            "method": "dflash",
            "draft_model": "tiny-qwen3-dflash",
            "k": 3,
            "engine": SYNC,
        },
    ),
}


def trace_config(name: str, out: Path, kw: dict[str, Any]) -> TraceConfig:
    """The case's TraceConfig, whatever this checkout calls k and the engine options."""
    names = {f.name for f in dataclasses.fields(TraceConfig)}
    kw = dict(kw)
    k = kw.pop("k")
    kw["k" if "k" in names else "num_spec"] = k
    engine = kw.pop("engine", None)
    if engine:
        key = next(n for n in ("engine_options", "engine_extra") if n in names)
        kw[key] = engine
    return TraceConfig(
        prompts=PROMPTS,
        out=out,
        load_format="dummy",
        dtype="bfloat16",
        limit=PER_LANG,
        sampling=SamplingConfig(max_tokens=MAX_TOKENS, logprobs=5),
        cap_tokens=MAX_TOKENS,
        max_model_len=2048,
        overwrite=True,
        argv=("gpu_trace_cases.py", name),
        **kw,
    )


def summarise(name: str, out: Path, record: dict[str, Any]) -> dict[str, Any]:
    manifest_path = out / "manifest.json"
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        capture = manifest.get("capture") or {}
        record.update(
            {
                "status": manifest.get("status"),
                "engine": manifest.get("engine"),
                "reconciliation": manifest.get("reconciliation"),
                "per_request_reconciliation": (
                    manifest.get("per_request_reconciliation") or {}
                ).get("exact"),
                "async_scheduling": capture.get("async_scheduling"),
                "draft_ids": capture.get("draft_ids"),
                "filler_drafts": capture.get("filler_drafts"),
                "hook": capture.get("hook"),
                "tier": capture.get("tier"),
            }
        )
    metrics = out / "metrics.json"
    if metrics.is_file():
        record["vllm_counters"] = json.loads(metrics.read_text())
    return record


def main() -> int:
    root = Path(sys.argv[1])
    root.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[2:]:
        env, kw = CASES[name]
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        out = root / name
        record: dict[str, Any] = {"case": name, "env": env}
        t0 = time.time()
        try:
            run_trace(trace_config(name, out, kw), SILENT)
            record["ok"] = True
        except BaseException as exc:  # recorded; the next case runs
            record["ok"] = False
            record["error"] = f"{type(exc).__name__}: {exc}"[:3000]
            record["traceback"] = traceback.format_exc()[-3000:]
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        record["seconds"] = round(time.time() - t0, 1)
        summarise(name, out, record)
        short = {k: record.get(k) for k in ("case", "ok", "seconds", "reconciliation")}
        ids = record.get("draft_ids") or {}
        short["ids"] = {k: ids.get(k) for k in ("source", "unknown", "unknown_share", "recovered")}
        short["async"] = record.get("async_scheduling")
        short["engine"] = record.get("engine")
        short["error"] = (record.get("error") or "")[:800]
        print(json.dumps(short, default=str), flush=True)
        with (root / "summary.jsonl").open("a") as fh:
            fh.write(json.dumps(record, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
