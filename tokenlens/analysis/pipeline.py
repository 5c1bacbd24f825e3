"""``tokenlens analyze``: run directories -> tokens.parquet, outputs.parquet, summary.json,
tables.md.

:func:`run_analyze` reads each run, joins events with requests and text classes
(:mod:`tokenlens.analysis.join`; the display text of every output token goes to
outputs.parquet for the report's token view), and hands one frame to :func:`summarize`, which
computes every figure with one seeded prompt-clustered bootstrap. ``summarize`` is
also what the test bed calls on simulated frames, so the numbers it checks are the
ones users get. The HTML report is written by the caller (the CLI or ``demo``) from
these outputs: analysis never imports the presentation layer.
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
from tokenlens.analysis.bootstrap import DEFAULT_METHOD, LEVEL, METHODS, Resampler
from tokenlens.analysis.breakdown import (
    BREAKDOWNS,
    group_codes,
    per_lang,
    positions,
    rates,
    row_mask,
    text_per_step,
)
from tokenlens.analysis.classes import class_gaps
from tokenlens.analysis.decompose import CONF_BINS, Support, decompose, has_pair
from tokenlens.analysis.domains import domain_section
from tokenlens.analysis.explore import class_differences
from tokenlens.analysis.gap import gap, regression
from tokenlens.analysis.inputs import validate_inputs
from tokenlens.analysis.join import join_run, output_texts
from tokenlens.analysis.rejections import rejection_section
from tokenlens.analysis.rules import FREE, INCONCLUSIVE, TRAINED, Rules
from tokenlens.analysis.sensitivity import add_sensitivity
from tokenlens.analysis.speed import default_cost, fit_draft_cost, read_bench_points, speed_model
from tokenlens.analysis.summary_file import load_summary
from tokenlens.analysis.tables import write_tables
from tokenlens.analysis.verdicts import (
    compute_parts,
    configurations,
    decide,
    families,
    rules_identity,
)
from tokenlens.capture.reconcile import reconciliation
from tokenlens.errors import TokenlensError
from tokenlens.format_version import ANALYSIS, stamp
from tokenlens.progress import SILENT, Progress
from tokenlens.replay.trust import unvouched
from tokenlens.rundir import read_run, write_json_atomic
from tokenlens.signature import make_signature, parse_signature

TOKENS = "tokens.parquet"
OUTPUTS = "outputs.parquet"
SUMMARY = "summary.json"
TABLES = "tables.md"
DESCRIBE_BY = ("script", "boundary", "particle_type", "rank_bucket")


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
    alpha: float = Rules.alpha
    draft_cost: float | None = None
    bench: Path | None = None
    regression: bool = True
    min_prompts: int = 30
    interval: str = DEFAULT_METHOD
    support: Support = field(default_factory=Support)
    # Input checks (tokenlens.analysis.inputs): analyse partial / unreconciled runs anyway,
    # and write into an --out that holds files analyze did not write.
    allow_partial: bool = False
    allow_unreconciled: bool = False
    overwrite: bool = False
    # A prompt file whose tags.domain gives each prompt's domain (the per-domain gaps).
    prompts: Path | None = None
    # The sections no verdict reads (per-class differences, per-k verdicts, domains,
    # rejections): the test bed leaves them out to measure the verdicts faster.
    details: bool = True


@dataclass(frozen=True)
class AnalyzeResult:
    tokens_path: Path
    outputs_path: Path
    summary_path: Path
    tables_path: Path
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
    reconciliation: dict[str, Any] | None = None
    replayed_from: str | None = None
    # Why no verdict may rest on this run (an approximate replay nothing vouches for).
    unvouched: str | None = None
    # Where the run's numbers come from (dtype, weights, the trace a replay came from):
    # written into its runs[] section for FINDINGS' provenance (:func:`provenance`).
    provenance: dict[str, Any] = field(default_factory=dict)


def run_analyze(config: AnalyzeConfig, progress: Progress = SILENT) -> AnalyzeResult:
    """Analyse ``config.runs`` and write tokens.parquet, outputs.parquet, summary.json and
    tables.md."""
    # The options first: nothing is read or created for a run that cannot be analysed.
    if config.n_boot < 10:
        raise TokenlensError("--bootstrap must be at least 10")
    if config.interval not in METHODS:
        raise TokenlensError(f"--interval must be one of {', '.join(METHODS)}")
    if not 0.0 < config.alpha < 0.5:
        raise TokenlensError(f"--alpha must lie between 0 and 0.5 (got {config.alpha:g})")
    domains = _prompt_domains(config)  # before validate_inputs creates --out
    checked = validate_inputs(config)  # every input check, before any work
    if not config.runs:
        raise TokenlensError("analyze needs at least one run directory")
    runs = [read_run(path) for path in config.runs]  # validate all before any work
    progress.stage("read and classify runs", total=len(config.runs), unit="run")
    frames, outputs, infos = [], [], []
    labels = _labels(config.runs)
    for run, label in zip(runs, labels, strict=True):
        frames.append(join_run(run, label, config.tokenizer))
        outputs.append(output_texts(run, label, config.tokenizer))
        spec = run.manifest["speculative"]
        problems: list[str] = ["no events"]
        derived = None  # the counters the events imply, padded to vLLM's width
        if run.events is not None:
            counted = reconciliation(run.events, run.metrics, run.empty_steps)
            problems, derived = counted.problems, counted.events.to_json()
        replayed = run.manifest.get("replayed_from")
        infos.append(
            RunInfo(
                label=label,
                path=str(run.path),
                method=str(spec.get("method", "unknown")),
                k=int(spec.get("num_speculative_tokens") or 0),
                signature=str(run.manifest["signature"]),
                status=str(run.manifest["status"]),
                metrics=run.metrics.to_json(),
                reconciliation={
                    "matches": not problems,
                    "differences": problems,
                    "events": derived,
                },
                replayed_from=str(replayed) if replayed else None,
                unvouched=unvouched(run.manifest),
                provenance=provenance(run.manifest),
            )
        )
        progress.advance()
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    for name in ("run", "method"):
        frame[name] = frame[name].astype("category")
    if domains is not None:
        frame["domain"] = pd.Categorical(frame["prompt_id"].astype(str).map(domains))
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
    outputs_path = config.out / OUTPUTS
    pq.write_table(pa.concat_tables(outputs), outputs_path)
    summary_path = config.out / SUMMARY
    write_json_atomic(summary_path, summary)
    tables_path = config.out / TABLES
    write_tables(load_summary(summary_path), tables_path)
    progress.close()
    return AnalyzeResult(tokens_path, outputs_path, summary_path, tables_path, summary)


def provenance(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """What a run's numbers rest on, from its manifest: the dtype it ran in, the weights
    of embedded models (quantized GGUFs, dequantized), and for a replay the trace it was
    replayed from (by directory name and signature)."""
    from tokenlens.models.embedded import lookup

    trace = manifest.get("trace_config")
    dtype = manifest.get("dtype") or (trace.get("dtype") if isinstance(trace, dict) else None)
    models = []
    for key in manifest.get("embedded_models") or []:
        model = lookup(str(key))
        if model is not None:
            models.append(
                {
                    "key": model.key,
                    "role": model.role,
                    "weights": f"{model.upstream}, dequantized to float32 (models/gguf_to_hf.py)",
                }
            )
    source = manifest.get("replay_source")
    return {
        "dtype": str(dtype) if dtype else None,
        "models": models,
        "replay_source": Path(str(source)).name if source else None,
    }


def _prompt_domains(config: AnalyzeConfig) -> dict[str, str] | None:
    """``{prompt_id: domain}`` from ``tags.domain`` of ``config.prompts`` (None without
    one), refused in one line when a prompt of the runs has none. Reads only the runs'
    ``prompt_id`` column: a run that cannot be read is left to the input checks."""
    path = config.prompts
    if path is None:
        return None
    if not path.is_file():
        raise TokenlensError(f"--prompts {path}: no such file")
    from tokenlens.prompts import read_prompts

    domain: dict[str, str] = {}
    for prompt in read_prompts(path):
        tags = prompt.tags if isinstance(prompt.tags, dict) else {}
        if isinstance(tags.get("domain"), str):
            domain[prompt.id] = tags["domain"]
    for run in config.runs:
        try:
            ids = pq.read_table(run / "requests.parquet", columns=["prompt_id"])
        except (OSError, KeyError, pa.ArrowException):
            continue
        missing = sorted({str(x) for x in ids.column("prompt_id").to_pylist()} - set(domain))
        if missing:
            raise TokenlensError(
                f"--prompts {path}: no tags.domain for prompt {missing[0]!r} of run {run.name} "
                f"({len(missing)} prompts without one)"
            )
    return domain


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
    rules = Rules(delta=config.delta, min_prompts=config.min_prompts, alpha=config.alpha)
    rs = Resampler.from_frame(
        frame,
        config.n_boot,
        config.seed,
        method=config.interval,
        decision_level=rules.decision_level,
    )
    judged = row_mask(frame, "judged")
    parts = compute_parts(frame, rs, config.support)
    fams = families(frame)
    scope_name = TRAINED if TRAINED in fams else FREE
    scope = fams.get(scope_name, np.ones(len(frame), dtype=bool))
    configs = configurations(frame, scope)
    out: dict[str, Any] = {
        **stamp(ANALYSIS),
        "signature": None,
        "tokenlens_version": __version__,
        "settings": {
            "seed": config.seed,
            "bootstrap": config.n_boot,
            "level": LEVEL,
            "interval": config.interval,
            "cluster": rs.unit,
            "clusters": rs.n_clusters,
            "min_count": config.min_count,
            "confidence_bins": CONF_BINS,
            "support": config.support.to_json(),
            **rules.to_json(),
            "rules_hash": rules_identity(rules, config.support),
        },
        "scope": _scope(frame, scope_name, scope, configs),
        "prompts": parts.prompts,
        "acceptance": per_lang(frame, rs, scope, config.min_count),
        "acceptance_judged": per_lang(frame, rs, judged & scope, config.min_count),
    }
    unconditional, conditional = (
        positions(frame, rs, scope, config.min_count) if len(configs) == 1 else ({}, {})
    )
    out["by_position"] = unconditional
    for b in BREAKDOWNS:
        if b.column in frame:
            rows = scope if b.rows == "all" else judged & scope
            out[b.name] = rates(frame, rs, b.column, rows, config.min_count)
    out["by_position_conditional"] = conditional
    out["text_per_step"] = text_per_step(frame, rs, scope)
    out["families"] = parts.families
    out["h2_contrast"] = parts.contrast
    out["gap"] = _gap_section(frame, rs, judged, config)
    out["hypotheses"] = refuse_unvouched(decide(frame, rs, rules, parts), infos)
    if config.details:
        add_sensitivity(out["hypotheses"], frame, rs, rules, config.support, parts)
        out["classes"] = class_gaps(frame, rs, fams, judged, config.support, config.min_count)
        out["rejections"] = rejection_section(frame, rs, fams)
        if "domain" in frame:
            pooled = {name: block.get("gap_judged") for name, block in parts.families.items()}
            # the file's name, not its path: summary.json travels (committed samples)
            source = f"tags.domain of {config.prompts.name}" if config.prompts else "tags.domain"
            out["domains"] = domain_section(
                frame, rs, fams, judged, pooled, rules, config.seed, source
            )
    out["runs"] = [
        _run_section(frame, rs, info, config, (costs or {}).get(info.method)) for info in infos
    ]
    return out


def refuse_unvouched(hypotheses: dict[str, Any], infos: Sequence[RunInfo]) -> dict[str, Any]:
    """No verdict from approximate replays that no check trace vouches for
    (:mod:`tokenlens.replay.trust`): each hypothesis becomes inconclusive, says why, and
    keeps its figures."""
    reasons = [f"{info.label}: {info.unvouched}" for info in infos if info.unvouched]
    if not reasons:
        return hypotheses
    out = {}
    for name, h in hypotheses.items():
        out[name] = {
            **h,
            "verdict": INCONCLUSIVE,
            "refused": reasons,
            "evidence": (
                f"No verdict: {len(reasons)} analysed run(s) are approximate replays that "
                f"no check trace vouches for ({reasons[0]}). {h.get('evidence', '')}"
            ).strip(),
        }
    return out


def _scope(
    frame: pd.DataFrame, family: str, mask: np.ndarray[Any, Any], configs: list[list[Any]]
) -> dict[str, Any]:
    """What the per-language sections at the top of summary.json cover, and why.

    They exist for the outside contract (``acceptance``, ``by_script``, ``by_pos``,
    ``by_position`` per language) and describe one drafter family, never two: pooling
    the n-gram and trained runs would turn each method's share of rows into a figure of
    no configuration anyone runs. Within the family every run given is pooled; per-run
    figures are in ``runs[]``, per-family ones in ``families``.
    """
    runs = sorted(set(frame["run"].astype(str).to_numpy()[mask]))
    ks = sorted({int(k) for _, k in configs})
    if len(configs) == 1:
        note = "one run configuration: nothing is pooled across drafters or k."
    else:
        note = (
            f"pooled over the {family.replace('_', '-')} family's runs at k = "
            + ", ".join(str(k) for k in ks)
            + ": the judged-position figures (acceptance_judged, the by_* class "
            "breakdowns) as the verdicts read them; vLLM's all-draft-token rate "
            "(acceptance) and text_per_step depend on k, so read them per run (runs[]); "
            "by_position and by_position_conditional exist per run only (runs[])."
        )
    others = sorted(set(frame["run"].astype(str).to_numpy()[~mask]))
    return {
        "family": family,
        "runs": runs,
        "configurations": configs,
        "left_out": others,
        "note": note
        + (
            f" The other drafter family's runs ({', '.join(others)}) are in families and runs[]."
            if others
            else ""
        ),
    }


def _gap_section(
    frame: pd.DataFrame, rs: Resampler, judged: np.ndarray[Any, Any], config: AnalyzeConfig
) -> dict[str, Any] | None:
    """Descriptive gap figures of the primary family (trained drafters when present).

    Never pooled across drafter families: each family's share of the rows would leak
    into the composition of a pooled split.
    """
    fams = families(frame)
    family = TRAINED if TRAINED in fams else FREE if FREE in fams else None
    if family is None:
        return None
    mask = fams[family]
    rows = judged & mask
    if not has_pair(frame, rows):
        return None
    section: dict[str, Any] = {
        "family": family,
        "overall": gap(frame, rs, mask),
        "judged": gap(frame, rs, rows),
        "relative_judged": gap(frame, rs, rows, relative=True),
        "decomposition": {},
    }
    for column in DESCRIBE_BY:
        if column in frame:
            codes, labels = group_codes(frame, column)
            dec = decompose(frame, rs, codes, labels, rows, config.support, column)
            if dec is not None:
                section["decomposition"][column] = dec
    section["explore"] = class_differences(
        frame, rs, fams, judged, config.support, config.min_count
    )
    if config.regression:
        section["regression"] = regression(frame, "script", rows, config.min_count, config.seed)
    return section


def _run_section(
    frame: pd.DataFrame,
    rs: Resampler,
    info: RunInfo,
    config: AnalyzeConfig,
    cost: tuple[float, str] | None,
) -> dict[str, Any]:
    mine = frame["run"].astype(str).to_numpy() == info.label
    sub_judged = mine & row_mask(frame, "judged")
    acceptance = per_lang(frame, rs, mine, config.min_count)
    judged_rate = per_lang(frame, rs, sub_judged, config.min_count)
    unconditional, conditional = positions(frame, rs, mine, config.min_count)
    section: dict[str, Any] = {
        "label": info.label,
        "path": info.path,
        "method": info.method,
        "k": info.k,
        "signature": info.signature,
        "status": info.status,
        "replayed": info.replayed_from is not None,
        "replayed_from": info.replayed_from,
        "reconciliation": {**(info.reconciliation or {"matches": None}), "vllm": info.metrics},
        "acceptance": acceptance,
        "acceptance_judged": judged_rate,
        "by_position": unconditional,
        "by_position_conditional": conditional,
        "text_per_step": text_per_step(frame, rs, mine),
        **info.provenance,
    }
    if has_pair(frame, mine):
        section["gap"] = gap(frame, rs, mine)
        section["relative_gap_judged"] = gap(frame, rs, sub_judged, relative=True)
    if cost is not None:
        used_cost, cost_source, measured = cost[0], cost[1], True
    else:
        used_cost, cost_source, measured = default_cost(info.method), "assumed default", False
    lang_of = frame["lang"].astype(str).to_numpy()
    first = frame["position"].to_numpy() == 0
    speed = {}
    for lang, block in acceptance.items():
        # vLLM's a_p (accepted at p / all drafts): 1 + the sum is tokens per step
        curve = [
            unconditional.get(lang, {}).get(str(p), {}).get("per_draft") or 0.0
            for p in range(info.k)
        ]
        steps = int((mine & first & (lang_of == lang)).sum())
        tps = 1.0 + block["accepted"] / steps if steps else None
        iid = (judged_rate.get(lang) or {}).get("rate") or 0.0
        speed[lang] = speed_model(curve, iid, info.k, used_cost, tps, cost_measured=measured)
    section["speed"] = {
        "draft_cost_source": cost_source,
        "draft_cost": used_cost,
        "draft_cost_measured": measured,
        "by_lang": speed,
    }
    return section


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
    merged["interval"] = config.interval
    merged["cluster"] = "prompt"
    # The frozen rule set (δ, α, minimum prompts, support, the rules' code): a verdict
    # names the rules it was read by.
    rules = Rules(delta=config.delta, min_prompts=config.min_prompts, alpha=config.alpha)
    merged["rules"] = rules_identity(rules, config.support)
    return make_signature(merged)
