"""The positive control of issue 32: drafters fine-tuned at set Japanese shares, traced
and analysed as a user would (reports/gpu/control/README.md; docs/study.md).

usage: python3 benchmarks/positive_control.py STAGE --work WORK [options]

Stages (each with --budget-s: it stops cleanly, between units of work, when the next
unit would not fit; run again to continue where it stopped):
  prompts    training prompts + the overlap check, held-out prompts + theirs
             -> WORK/training/prompts*.json*, WORK/training/heldout_prompts*.json*
  generate   the target's greedy answers (vLLM offline) -> WORK/training/generations.jsonl,
             and to the held-out prompts -> WORK/training/heldout.jsonl
  finetune   one drafter per --shares value (same answer tokens each; --objective kl|ce,
             --lr) -> WORK/drafters/,
             WORK/training/records.json (share, tokens, steps, loss curve, seed, SHA-256)
  prepare    prompts + generate + finetune under one budget
  check      the manipulation check: each drafter's (and the untuned one's) top-1 agreement
             with the target on the held-out answers -> records.json; exits 3 with one
             line when the planted ordering is not there by --check-margin (then trace
             nothing)
  trace      `tokenlens trace` per drafter (and the untuned one) + n-gram, side by side
             on one GPU (--gpu-mem each) -> WORK/runs/<name>/
  analyze    `tokenlens analyze DRAFTER NGRAM` per drafter -> WORK/analyses/<name>/
  study      -> WORK/study.json (and --out)

Weights stay under WORK/drafters; nothing else the stages write holds weights.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from control_kit import prompts as prompt_set
from control_kit.options import parser
from control_kit.study import build_study
from control_kit.traces import NGRAM, Job, analyze_argv, run_parallel, trace_argv

ROOT = Path(__file__).resolve().parent.parent
T0 = time.monotonic()
UNTUNED = "untuned"


def log(msg: str) -> None:
    now = datetime.now(UTC).strftime("%H:%M:%S")
    print(f"[{now} +{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def drafter_name(share: float) -> str:
    return f"ja{round(share * 100):03d}"


def shares_arg(text: str) -> list[float]:
    vals = [float(x) for x in text.split(",") if x.strip()]
    if not vals or any(not 0.0 <= v <= 1.0 for v in vals) or len(set(vals)) != len(vals):
        raise argparse.ArgumentTypeError("comma-separated distinct shares in [0, 1]")
    return vals


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def code_commit(given: str | None) -> dict[str, Any]:
    """--commit when given (a copied checkout may carry a stale .git: seen on the GPU
    host, 2026-12-03, where git named an older commit), else git's, else null."""
    if given:
        return {"value": given, "source": "--commit"}

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        head, dirty = git("rev-parse", "HEAD"), git("status", "--porcelain")
    except (OSError, subprocess.CalledProcessError):
        return {"value": None, "reason": "no git checkout and no --commit"}
    return {"value": head, "source": "git", "dirty": bool(dirty)}


def stage_prompts(a: argparse.Namespace) -> None:
    kept, report = prompt_set.prepare(ROOT, a.seed)
    per_lang = {lang: [p for p in kept if p["lang"] == lang] for lang in ("ja", "en")}
    chosen = [p for lang in ("ja", "en") for p in per_lang[lang][: a.prompts_per_lang]]
    train = a.work / "training"
    train.mkdir(parents=True, exist_ok=True)
    with (train / "prompts.jsonl").open("w", encoding="utf-8") as f:
        for p in chosen:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    report["written_per_lang"] = {k: min(len(v), a.prompts_per_lang) for k, v in per_lang.items()}
    write_json(train / "prompts_check.json", report)
    held, held_report = prompt_set.prepare_heldout(ROOT, kept)
    with (train / "heldout_prompts.jsonl").open("w", encoding="utf-8") as f:
        for p in held:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    write_json(train / "heldout_prompts_check.json", held_report)
    log(
        f"prompts: built {report['built']}, overlapping {report['overlapping']}, wrote "
        f"{report['written_per_lang']}; held-out {held_report['kept']} of "
        f"{held_report['built']} kept"
    )


def stage_generate(a: argparse.Namespace, deadline: float) -> None:
    from control_kit.generate import generate

    train = a.work / "training"
    out = train / "generations.jsonl"
    if (train / "generation.json").exists() and out.exists() and not a.again:
        log("generate: already done (--again to redo)")
        return
    prompts = prompt_set.read_jsonl(train / "prompts.jsonl")
    engine = {"enforce_eager": a.eager, **dict(_kv(x) for x in a.gen_engine_option)}
    record = generate(
        prompts,
        a.target,
        out,
        tokens=a.tokens,
        deadline=deadline,
        max_tokens=a.max_tokens,
        chunk=a.chunk,
        engine=engine,
        log=log,
        heldout=_heldout_job(train, a.heldout_max_tokens),
    )
    write_json(train / "generation.json", record)


def _heldout_job(train: Path, max_tokens: int) -> tuple[list[dict[str, Any]], Path, int] | None:
    src = train / "heldout_prompts.jsonl"
    if not src.exists():
        return None
    return prompt_set.read_jsonl(src), train / "heldout.jsonl", max_tokens


def _kv(text: str) -> tuple[str, Any]:
    key, _, value = text.partition("=")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def stage_finetune(a: argparse.Namespace, deadline: float) -> None:
    from control_kit import mixing
    from control_kit.finetune import TrainConfig, train

    pools = mixing.load_pools(a.work / "training" / "generations.jsonl")
    have = {k: mixing.pool_tokens(v) for k, v in pools.items()}
    n = min(a.tokens, have["ja"], have["en"])
    records_path = a.work / "training" / "records.json"
    records = read_json(records_path)
    if records.get("tokens_per_drafter") not in (None, n):
        raise SystemExit(
            f"records.json was trained at {records['tokens_per_drafter']} tokens, "
            f"now {n}: use a new --work"
        )
    records.update(
        {
            "tokens_per_drafter": n,
            "pool_tokens": have,
            "commit": code_commit(a.commit),
            "generation": read_json(a.work / "training" / "generation.json"),
            "prompts_check": read_json(a.work / "training" / "prompts_check.json"),
        }
    )
    records.setdefault("drafters", {})
    cfg = TrainConfig(
        lr=a.lr,
        rows_per_step=a.rows_per_step,
        micro_rows=a.micro_rows,
        seq_len=a.seq_len,
        seed=a.seed,
        log_every=a.log_every,
        objective=a.objective,
        layers=a.drafter_layers,
    )
    log(f"finetune: {n} answer tokens per drafter (pools {have}); {cfg}")
    order = sorted(a.shares, key=lambda s: (s not in (0.0, 1.0), a.shares.index(s)))
    est = n / a.train_tok_s + 30.0
    for share in order:
        name = drafter_name(share)
        if name in records["drafters"] and (a.work / "drafters" / name).exists():
            log(f"finetune {name}: already done")
            continue
        if time.monotonic() + est > deadline:
            log(f"finetune {name}: skipped, ~{est:.0f} s would pass the budget")
            records["drafters"].pop(name, None)
            continue
        examples = mixing.mix(pools, share, n, a.seed)
        packed = mixing.pack(examples, cfg.seq_len, pad_id=0)
        ja, en = mixing.split(share, n)
        assert (packed.tokens("ja"), packed.tokens("en")) == (ja, en)
        rec = train(a.drafter, packed, a.work / "drafters" / name, cfg, teacher=a.target)
        rec.update(
            {
                "share": share,
                "examples": len(examples),
                "commit": records["commit"],
                "original_drafter": str(a.drafter),
            }
        )
        if not rec["packing_check"].get("passed", True):
            log(f"WARNING finetune {name}: packing check failed: {rec['packing_check']}")
        records["drafters"][name] = rec
        write_json(records_path, records)
        est = rec["wall_s"] * 1.1
        log(
            f"finetune {name}: {rec['steps']} steps, loss {rec['loss_curve'][0]['loss']:.3f} -> "
            f"{rec['loss_curve'][-1]['loss']:.3f}, {rec['train_tokens_per_s']} tok/s, "
            f"sha256 {rec['weights']['sha256'][:12]}"
        )
    write_json(records_path, records)


def stage_prepare(a: argparse.Namespace, deadline: float) -> None:
    """prompts, then generate in a child process (its engine's memory is surely given back
    when it exits), then finetune here, each within what is left of the budget."""
    stage_prompts(a)
    reserve = len(a.shares) * (a.tokens / a.train_tok_s + 30.0)
    budget = deadline - reserve - time.monotonic()
    argv = [
        sys.executable,
        str(Path(__file__).resolve()),
        "generate",
        "--work",
        str(a.work),
        "--target",
        str(a.target),
        "--tokens",
        str(a.tokens),
        "--max-tokens",
        str(a.max_tokens),
        "--chunk",
        str(a.chunk),
        "--heldout-max-tokens",
        str(a.heldout_max_tokens),
        "--budget-s",
        f"{budget:.0f}",
        "--eager" if a.eager else "--no-eager",
        *(["--again"] if a.again else []),
        *[f"--gen-engine-option={x}" for x in a.gen_engine_option],
    ]
    rc = subprocess.run(argv, check=False).returncode
    if rc != 0:
        raise SystemExit(f"generate failed (exit status {rc})")
    stage_finetune(a, deadline)


def stage_check(a: argparse.Namespace) -> None:
    """Held-out agreement per drafter (and the untuned one) into records.json, then the
    check; SystemExit(3) with one line when it fails."""
    from control_kit.agreement import run_check

    records_path = a.work / "training" / "records.json"
    records = read_json(records_path)
    dirs = {n: a.work / "drafters" / n for n in sorted(records.get("drafters", {}))}
    refs: dict[str, Path] = {UNTUNED: a.drafter}
    if a.drafter_layers:  # the shallow drafter before distillation: measured, not judged
        from control_kit.finetune import shallow_reference

        name = f"{UNTUNED}_{a.drafter_layers}layers"
        refs[name] = shallow_reference(
            a.drafter, a.drafter_layers, a.work / "drafters-reference" / name
        )
    result = run_check(
        records,
        a.work / "training" / "heldout.jsonl",
        {**refs, **dirs},
        untuned=UNTUNED,
        margin=a.check_margin,
        seq_len=a.seq_len,
        rows=a.check_rows,
        log=log,
    )
    write_json(records_path, records)
    if not result["passed"]:
        print(
            f"manipulation check FAILED ({result['conditions']}; {result['values']}): "
            "trace nothing",
            file=sys.stderr,
        )
        raise SystemExit(3)
    log(f"check passed: {result['values']}")


def _tl(a: argparse.Namespace) -> list[str]:
    return shlex.split(a.tl)


def stage_trace(a: argparse.Namespace, deadline: float) -> None:
    records = read_json(a.work / "training" / "records.json").get("drafters", {})
    drafters: dict[str, str | Path] = {UNTUNED: a.untuned} if a.untuned != "none" else {}
    drafters |= {n: a.work / "drafters" / n for n in sorted(records)}
    extra = [x for kv in a.trace_engine_option for x in ("--engine-option", kv)]
    if a.eager:
        extra += ["--engine-option", "enforce_eager=true"]
    extra += shlex.split(a.trace_extra)
    if a.kv_cache_gb:
        extra += ["--engine-option", f"kv_cache_memory_bytes={int(a.kv_cache_gb * 2**30)}"]
    jobs = []
    for name, path in [*drafters.items(), (NGRAM, None)]:
        run = a.work / "runs" / name
        if (run / "manifest.json").exists() and read_json(run / "manifest.json").get(
            "status"
        ) == "complete":
            log(f"trace {name}: complete already")
            continue
        argv = trace_argv(
            _tl(a),
            a.prompts,
            run,
            path,
            k=a.k,
            dtype=a.dtype,
            gpu_mem=a.gpu_mem,
            cap_tokens=a.cap_tokens,
            extra=[*extra, "--overwrite"],
        )
        env = {"VLLM_CACHE_ROOT": str(a.work / "vllm-cache" / name), "PYTHONUNBUFFERED": "1"}
        jobs.append(Job(name, argv, a.work / "logs" / f"trace-{name}.log", env))
    results = run_parallel(jobs, deadline, stagger_s=a.stagger_s, log=log)
    merged = {**read_json(a.work / "logs" / "traces.json"), **results}
    write_json(a.work / "logs" / "traces.json", merged)


def stage_analyze(a: argparse.Namespace, deadline: float) -> None:
    runs = a.work / "runs"
    names = [p.name for p in sorted(runs.iterdir()) if p.name != NGRAM and p.is_dir()]
    jobs = [
        Job(
            n,
            analyze_argv(_tl(a), runs / n, runs / NGRAM, a.prompts, a.work / "analyses" / n),
            a.work / "logs" / f"analyze-{n}.log",
            {},
        )
        for n in names
    ]
    results = run_parallel(jobs, deadline, max_parallel=a.jobs, log=log)
    write_json(a.work / "logs" / "analyses.json", results)


def stage_study(a: argparse.Namespace) -> None:
    records = read_json(a.work / "training" / "records.json")
    runs = a.work / "runs"
    traced = {p.name for p in runs.iterdir() if p.is_dir()} if runs.exists() else set()
    names = sorted((traced | set(records.get("drafters", {}))) - {NGRAM})
    study = build_study(records, a.work / "runs", a.work / "analyses", names)
    for path in {a.work / "study.json", *([a.out] if a.out else [])}:
        write_json(path, study)
    log(f"study: {len(names)} drafters; checks {json.dumps(study['checks'])[:400]}")


def main(argv: list[str] | None = None) -> int:
    a = parser(__doc__, ROOT, shares_arg).parse_args(argv)
    deadline = T0 + a.budget_s
    a.work.mkdir(parents=True, exist_ok=True)
    log(f"stage {a.stage}, budget {a.budget_s:.0f} s, work {a.work}")
    if a.stage in ("generate", "prepare") and a.target is None:
        raise SystemExit("--target is needed")
    if a.stage in ("finetune", "prepare", "check") and a.drafter is None:
        raise SystemExit("--drafter is needed")
    if a.stage in ("finetune", "prepare") and a.objective == "kl" and a.target is None:
        raise SystemExit("--objective kl needs --target (the teacher)")
    stages = {
        "prompts": lambda: stage_prompts(a),
        "generate": lambda: stage_generate(a, deadline),
        "finetune": lambda: stage_finetune(a, deadline),
        "prepare": lambda: stage_prepare(a, deadline),
        "check": lambda: stage_check(a),
        "trace": lambda: stage_trace(a, deadline),
        "analyze": lambda: stage_analyze(a, deadline),
        "study": lambda: stage_study(a),
    }
    stages[a.stage]()
    log(f"stage {a.stage} done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
