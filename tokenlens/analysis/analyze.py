"""``tokenlens analyze``: run directories -> tokens.parquet, summary.json, tables.md.

:func:`run_analyze` reads each run, joins events with requests and text classes
(:mod:`tokenlens.analysis.join`), and hands one frame to :func:`summarize`, which
computes every figure with one seeded request-clustered bootstrap. ``summarize`` is
also what the tests call on simulated frames, so the numbers they check are the ones
users get.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tokenlens import __version__
from tokenlens.analysis.bootstrap import LEVEL, Resampler
from tokenlens.analysis.breakdown import BREAKDOWNS, per_lang, rates, row_mask, text_per_step
from tokenlens.analysis.gap import class_gaps, decompose, gap, has_pair, regression
from tokenlens.analysis.inputs import validate_inputs
from tokenlens.analysis.join import join_run
from tokenlens.analysis.speed import default_cost, fit_draft_cost, read_bench_points, speed_model
from tokenlens.analysis.tables import write_tables
from tokenlens.analysis.verdicts import Rules, decide
from tokenlens.errors import TokenlensError
from tokenlens.progress import SILENT, Progress
from tokenlens.report import write_analyze_report
from tokenlens.rundir import read_run, write_json_atomic
from tokenlens.signature import make_signature, parse_signature

TOKENS = "tokens.parquet"
SUMMARY = "summary.json"
TABLES = "tables.md"
DECOMPOSE_BY = ("conf_bucket", "script", "boundary", "particle_type", "rank_bucket")


@dataclass(frozen=True)
class AnalyzeConfig:
    """Options of one analysis (all recorded in summary.json)."""

    runs: tuple[Path, ...]
    out: Path
    seed: int = 0
    n_boot: int = 1000
    min_count: int = 30
    tokenizer: str | None = None
    delta: float = 0.02
    draft_cost: float | None = None
    bench: Path | None = None
    regression: bool = True
    # Input checks (tokenlens.analysis.inputs): analyse partial / unreconciled runs anyway,
    # and write into an --out that holds files analyze did not write.
    allow_partial: bool = False
    allow_unreconciled: bool = False
    overwrite: bool = False


@dataclass(frozen=True)
class AnalyzeResult:
    tokens_path: Path
    summary_path: Path
    tables_path: Path
    report_path: Path
    summary: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class RunInfo:
    """What the summary says about each input run."""

    label: str
    path: str
    method: str
    k: int
    signature: str
    status: str
    metrics: dict[str, Any]


def run_analyze(config: AnalyzeConfig, progress: Progress = SILENT) -> AnalyzeResult:
    """Analyse ``config.runs`` and write the three outputs under ``config.out``."""
    checked = validate_inputs(config)  # every input check, before any work
    if not config.runs:
        raise TokenlensError("analyze needs at least one run directory")
    if config.n_boot < 10:
        raise TokenlensError("--bootstrap must be at least 10")
    runs = [read_run(path) for path in config.runs]  # validate all before any work
    progress.stage("read and classify runs", total=len(config.runs), unit="run")
    frames, infos = [], []
    labels = _labels(config.runs)
    for run, label in zip(runs, labels, strict=True):
        path = run.path
        frames.append(join_run(run, label, config.tokenizer))
        spec = run.manifest["speculative"]
        infos.append(
            RunInfo(
                label=label,
                path=str(path),
                method=str(spec.get("method", "unknown")),
                k=int(spec.get("num_speculative_tokens") or 0),
                signature=str(run.manifest["signature"]),
                status=str(run.manifest["status"]),
                metrics=run.metrics.to_json(),
            )
        )
        progress.advance()
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    for name in ("run", "method"):
        frame[name] = frame[name].astype("category")
    if frame.empty:
        raise TokenlensError("the runs hold no draft events (was speculative decoding on?)")
    progress.stage("statistics")
    costs = _draft_costs(config, {info.method for info in infos})
    summary = summarize(frame, infos, config, costs)
    summary["signature"] = _signature(infos, config)
    summary["inputs"] = checked.section()
    progress.stage("write outputs")
    config.out.mkdir(parents=True, exist_ok=True)
    tokens_path = config.out / TOKENS
    write_tokens(frame, tokens_path)
    summary_path = config.out / SUMMARY
    write_json_atomic(summary_path, summary)
    tables_path = config.out / TABLES
    write_tables(summary, tables_path)
    progress.stage("write report")
    report_path = write_analyze_report(config.out)
    progress.close()
    return AnalyzeResult(tokens_path, summary_path, tables_path, report_path, summary)


def _draft_costs(config: AnalyzeConfig, methods: set[str]) -> dict[str, tuple[float, str]]:
    """Draft cost c per method and where it came from: --draft-cost, a bench fit, or none."""
    if config.draft_cost is not None:
        return {m: (config.draft_cost, "option") for m in methods}
    if config.bench is None:
        return {}
    points = read_bench_points(config.bench)
    costs = {}
    for method in methods:
        mine = [p for p in points if p.method == method]
        if mine:
            costs[method] = (fit_draft_cost(mine), "fitted")
    if not costs:
        raise TokenlensError(
            f"{config.bench}: no speculative case of {', '.join(sorted(methods))} "
            "with a matching baseline to fit the draft cost"
        )
    return costs


def _labels(paths: Sequence[Path]) -> list[str]:
    """Directory names, made unique with ``#i`` where two runs share one."""
    names = [p.resolve().name or str(p) for p in paths]
    return [n if names.count(n) == 1 else f"{n}#{i}" for i, n in enumerate(names)]


def write_tokens(frame: pd.DataFrame, path: Path) -> None:
    """tokens.parquet: categoricals as plain strings, nullable ints/bools kept nullable."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    fields = []
    for f in table.schema:
        fields.append(pa.field(f.name, pa.string()) if pa.types.is_dictionary(f.type) else f)
    pq.write_table(table.cast(pa.schema(fields)), path)


def summarize(
    frame: pd.DataFrame,
    infos: Sequence[RunInfo],
    config: AnalyzeConfig,
    costs: Mapping[str, tuple[float, str]] | None = None,
) -> dict[str, Any]:
    """Every figure of summary.json from one joined (or simulated) frame."""
    rs = Resampler.from_frame(frame, config.n_boot, config.seed)
    rules = Rules(delta=config.delta, min_count=config.min_count)
    all_rows = row_mask(frame, "all")
    judged = row_mask(frame, "judged")
    out: dict[str, Any] = {
        "signature": None,
        "tokenlens_version": __version__,
        "settings": {
            "seed": config.seed,
            "bootstrap": config.n_boot,
            "level": LEVEL,
            "min_count": config.min_count,
            "delta": rules.delta,
            "delta_relative": rules.delta_relative,
            "min_requests": rules.min_requests,
            "cluster": "request (run, request_id), strata (run, lang)",
        },
        "acceptance": per_lang(frame, rs, all_rows, config.min_count),
        "acceptance_judged": per_lang(frame, rs, judged, config.min_count),
    }
    for b in BREAKDOWNS:
        if b.column in frame:
            rows = all_rows if b.rows == "all" else judged
            out[b.name] = rates(frame, rs, b.column, rows, config.min_count)
    out["text_per_step"] = text_per_step(frame, rs)
    out["gap"] = _gap_section(frame, rs, judged, config)
    out["hypotheses"] = decide(frame, rs, rules)
    out["runs"] = [
        _run_section(frame, rs, info, config, (costs or {}).get(info.method)) for info in infos
    ]
    return out


def _gap_section(
    frame: pd.DataFrame, rs: Resampler, judged: np.ndarray[Any, Any], config: AnalyzeConfig
) -> dict[str, Any] | None:
    if not has_pair(frame):
        return None
    conf_rows = (
        judged & np.isfinite(frame["top1_prob"].to_numpy()) if "top1_prob" in frame else judged
    )
    section: dict[str, Any] = {
        "overall": gap(frame, rs, row_mask(frame, "all")),
        "judged": gap(frame, rs, judged),
        "relative_judged": gap(frame, rs, judged, relative=True),
        "by_script": class_gaps(frame, rs, "script", judged, config.min_count),
        "decomposition": {},
    }
    for column in DECOMPOSE_BY:
        if column in frame:
            rows = conf_rows if column == "conf_bucket" else judged
            dec = decompose(frame, rs, column, rows, config.min_count)
            if dec is not None:
                section["decomposition"][column] = dec
    if config.regression:
        section["regression"] = regression(frame, "script", judged, config.min_count, config.seed)
    return section


def _run_section(
    frame: pd.DataFrame,
    rs: Resampler,
    info: RunInfo,
    config: AnalyzeConfig,
    cost: tuple[float, str] | None,
) -> dict[str, Any]:
    mine = frame["run"].astype(str).to_numpy() == info.label
    sub_all = mine.copy()
    sub_judged = mine & row_mask(frame, "judged")
    acceptance = per_lang(frame, rs, sub_all, config.min_count)
    by_position = rates(frame, rs, "position", sub_all, config.min_count)
    section: dict[str, Any] = {
        "label": info.label,
        "path": info.path,
        "method": info.method,
        "k": info.k,
        "signature": info.signature,
        "status": info.status,
        "reconciliation": _reconcile(frame[mine], info.metrics),
        "acceptance": acceptance,
        "by_position": by_position,
    }
    if has_pair(frame[mine]):
        section["gap"] = gap(frame, rs, sub_all)
        section["relative_gap_judged"] = gap(frame, rs, sub_judged, relative=True)
    used_cost, cost_source = cost if cost is not None else (default_cost(info.method), "default")
    speed = {}
    for lang, block in acceptance.items():
        curve = [by_position[lang].get(str(p), {}).get("rate") or 0.0 for p in range(info.k)]
        rows_lang = frame.loc[mine & (frame["lang"].astype(str).to_numpy() == lang)]
        steps = int((rows_lang["position"].to_numpy() == 0).sum())
        measured = 1.0 + block["accepted"] / steps if steps else None
        speed[lang] = speed_model(curve, block["rate"] or 0.0, info.k, used_cost, measured)
    section["speed"] = {"draft_cost_source": cost_source, "draft_cost": used_cost, "by_lang": speed}
    return section


def _reconcile(rows: pd.DataFrame, metrics: dict[str, Any]) -> dict[str, Any]:
    """Events against vLLM's counters (the capture's test of truth)."""
    positions = rows["position"].to_numpy()
    accepted = rows["accepted"].to_numpy(dtype=bool)
    width = max(len(metrics["accepted_per_position"]), int(positions.max()) + 1 if len(rows) else 0)
    per_pos = np.bincount(positions[accepted], minlength=width).tolist() if len(rows) else []
    events = {
        "num_drafts": int(rows.groupby(["request_id", "step"], observed=True).ngroups),
        "num_draft_tokens": len(rows),
        "num_accepted_tokens": int(accepted.sum()),
        "accepted_per_position": per_pos,
    }
    expected = dict(metrics)
    expected["accepted_per_position"] = list(metrics["accepted_per_position"]) + [0] * (
        width - len(metrics["accepted_per_position"])
    )
    return {"matches": events == expected, "events": events, "vllm": metrics}


def _signature(infos: Sequence[RunInfo], config: AnalyzeConfig) -> str:
    """The runs' signature fields (values joined with '+' where runs differ), plus ours."""
    from tokenlens.text import dictionary_identity

    fields: dict[str, list[str]] = {}
    for info in infos:
        for key, value in parse_signature(info.signature).items():
            fields.setdefault(key, [])
            if value not in fields[key]:
                fields[key].append(value)
    merged: dict[str, Any] = {k: "+".join(v) for k, v in fields.items()}
    merged["tokenlens"] = __version__
    if config.tokenizer is not None:
        merged["tokenizer"] = config.tokenizer
    merged["dict"] = dictionary_identity()
    merged["bootstrap"] = f"{config.n_boot},seed{config.seed}"
    return make_signature(merged)
