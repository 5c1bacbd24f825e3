"""``tokenlens analyze``: run directories -> tokens.parquet, outputs.parquet, summary.json.

:func:`run_analyze` reads each run, joins events with requests and text classes
(:mod:`tokenlens.analysis.join`; the display text of every output token goes to
outputs.parquet for the report's token view), and hands one frame to
:func:`~tokenlens.analysis.summarize.summarize`, which
computes every figure with one seeded prompt-clustered bootstrap. ``summarize`` is
also what the test bed calls on simulated frames, so the numbers it checks are the
ones users get. tables.md and the HTML report are written by the caller (the CLI or
``demo``, through :mod:`tokenlens.report`) from these outputs: analysis never imports
the presentation layer.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tokenlens import __version__
from tokenlens.analysis.bootstrap import METHODS
from tokenlens.analysis.columns import labels
from tokenlens.analysis.config import AnalyzeConfig
from tokenlens.analysis.inputs import CheckedInputs, validate_inputs
from tokenlens.analysis.join import OUTPUTS_SCHEMA, output_texts, run_vocabulary
from tokenlens.analysis.memory import bound_heap, give_back_memory
from tokenlens.analysis.reread import Snapshot, reread
from tokenlens.analysis.rules import Rules
from tokenlens.analysis.speed import fit_draft_cost, read_bench_points
from tokenlens.analysis.stream import (
    UNREAD,
    RunParts,
    TableSink,
    assemble,
    compact,
    join_parts,
    plain_strings,
    spill,
    unspill,
)
from tokenlens.analysis.summarize import RunInfo, summarize
from tokenlens.analysis.verdicts import rules_identity
from tokenlens.capture.reconcile import reconciliation
from tokenlens.engine.methods import family_of
from tokenlens.errors import TokenlensError
from tokenlens.progress import SILENT, Progress
from tokenlens.replay.trust import unvouched
from tokenlens.rundir import MANIFEST, Run, manifest_k, write_json_atomic
from tokenlens.signature import make_signature, parse_signature
from tokenlens.text import Vocabulary

TOKENS = "tokens.parquet"
OUTPUTS = "outputs.parquet"
SUMMARY = "summary.json"


@dataclass(frozen=True)
class AnalyzeResult:
    tokens_path: Path
    outputs_path: Path
    summary_path: Path
    summary: dict[str, Any] = field(repr=False)


def run_analyze(config: AnalyzeConfig, progress: Progress = SILENT) -> AnalyzeResult:
    """Analyse ``config.runs`` and write tokens.parquet, outputs.parquet and summary.json."""
    # The options first: nothing is read or created for a run that cannot be analysed.
    if config.n_boot < 10:
        raise TokenlensError("--bootstrap must be at least 10")
    if config.interval not in METHODS:
        raise TokenlensError(f"--interval must be one of {', '.join(METHODS)}")
    if not 0.0 < config.alpha < 0.5:
        raise TokenlensError(f"--alpha must lie between 0 and 0.5 (got {config.alpha:g})")
    # One order whatever order the runs were given in: every output follows it.
    config = replace(config, runs=canonical_order(config.runs))
    families = _families(config)  # an unknown method stops here, before any output
    domains = _prompt_domains(config)  # before validate_inputs creates --out
    bound_heap()  # freed per-row arrays leave the resident set (analysis/stream.py)
    checked = validate_inputs(config)  # every input check, before any work
    if not config.runs:
        raise TokenlensError("analyze needs at least one run directory")
    # The checked runs hold no tables (analysis/run_facts.py): each run is read again
    # just before its join, with the checks' decisions (analysis/reread.py), so one run's
    # tables are held at a time; summary.json's inputs section reads paths and manifests.
    runs = list(zip(checked.runs, checked.snapshots, strict=True))
    give_back_memory()
    progress.stage("read and classify runs", total=len(runs), unit="run")
    # tokens.parquet and outputs.parquet are written chunk by chunk as the runs are
    # joined (analysis/stream.py), under temporary names until the summary is written.
    config.out.mkdir(parents=True, exist_ok=True)
    tokens = TableSink(config.out / TOKENS)
    outputs = TableSink(config.out / OUTPUTS, OUTPUTS_SCHEMA)
    try:
        # the joined columns of all runs but the one being joined wait in here, on disk
        with tempfile.TemporaryDirectory(dir=config.out, prefix=".tokenlens-join-") as spills:
            result = _analyze(
                config, checked, runs, families, domains, tokens, outputs, Path(spills), progress
            )
    except BaseException:
        tokens.abandon()
        outputs.abandon()
        raise
    progress.close()
    return result


def _analyze(
    config: AnalyzeConfig,
    checked: CheckedInputs,
    runs: list[tuple[Run, Snapshot]],
    families: dict[str, str],
    domains: dict[str, str] | None,
    tokens: TableSink,
    outputs: TableSink,
    spills: Path,  # a temporary directory: the joined runs' columns (stream.spill)
    progress: Progress,
) -> AnalyzeResult:
    directions = _prompt_directions(config) if domains is not None else {}
    parts: list[RunParts | Path] = []
    infos = []
    labels = _labels([run.path for run, _ in runs])
    for index, label in enumerate(labels):
        run = reread(*runs.pop(0))  # as checked: damage excluded, shared requests resolved
        vocab = run_vocabulary(run, config.tokenizer)

        def render(
            sub: Run, part: pd.DataFrame, label: str = label, vocab: Vocabulary = vocab
        ) -> tuple[pa.Table, pa.Table]:
            """A chunk's rows of outputs.parquet and tokens.parquet (in a join worker)."""
            tokens_rows = study_columns(part.copy(deep=False), families, domains, directions)
            return output_texts(sub, label, vocab), plain_strings(tokens_rows)

        def write(tables: tuple[pa.Table, ...]) -> None:
            outputs.write(tables[0])
            tokens.write(tables[1])

        problems: list[str] = ["no events"]
        derived = None  # the counters the events imply, padded to vLLM's width
        if run.events is not None:  # before the join: its transients do not add to the chunks'
            counted = reconciliation(run.events, run.metrics, run.empty_steps)
            problems, derived = counted.problems, counted.events.to_json()
        joined = join_parts(run, label, vocab, render, write, drop=UNREAD, jobs=config.jobs)
        if index + 1 < len(labels):  # to disk while the later runs are joined (stream.spill)
            parts.append(spill(joined, spills / f"{index}.pickle"))
        else:
            parts.append(joined)
        del joined
        replayed = run.manifest.get("replayed_from")
        infos.append(
            RunInfo(
                label=label,
                path=str(run.path),
                method=run.method,
                k=run.k,
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
        del run  # its tables leave memory before the next run's join or the figures
        give_back_memory()
    # one frame of every run's chunks, column by column (analysis/stream.py)
    frame = assemble([unspill(p) if isinstance(p, Path) else p for p in parts])
    del parts
    give_back_memory()
    frame = compact(study_columns(frame, families, domains, directions))
    if frame.empty:
        raise TokenlensError("the runs hold no draft events (was speculative decoding on?)")
    progress.stage("statistics")
    costs = _draft_costs(config, {info.method for info in infos})
    summary = summarize(frame, infos, config, costs)
    summary["signature"] = _signature(infos, config)
    summary["inputs"] = checked.section()
    progress.stage("write outputs")
    tokens.close()
    outputs.close()
    summary_path = config.out / SUMMARY
    write_json_atomic(summary_path, summary)
    return AnalyzeResult(tokens.path, outputs.path, summary_path, summary)


def study_columns(
    frame: pd.DataFrame,
    families: Mapping[str, str],
    domains: Mapping[str, str] | None,
    directions: Mapping[str, str],
) -> pd.DataFrame:
    """``frame`` (joined rows) with what the study adds to them: ``run`` and ``method``
    as categoricals, each row's drafter ``family``, and with --prompts its prompt's
    ``domain`` (and ``direction``, for cross-lingual prompts, e.g. en-ja)."""
    for name in ("run", "method"):
        frame[name] = frame[name].astype("category")
    frame["family"] = frame["method"].map(families).astype("category")
    if domains is not None:
        prompt = pd.Series(labels(frame, "prompt_id"), index=frame.index)
        frame["domain"] = pd.Categorical(prompt.map(domains))
        if directions:
            frame["direction"] = pd.Categorical(prompt.map(directions))
    return frame


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
        "device": device_label(manifest),
        "models": models,
        "replay_source": Path(str(source)).name if source else None,
    }


def device_label(manifest: Mapping[str, Any]) -> str | None:
    """The device the run's engine computed on, as its manifest's ``engine.device``
    names it: ``CPU``, or the accelerator's name (``NVIDIA H200``); None when the
    manifest predates that record."""
    engine = manifest.get("engine")
    device = engine.get("device") if isinstance(engine, Mapping) else None
    if not isinstance(device, Mapping) or not device.get("type"):
        return None
    if device["type"] == "cpu":
        return "CPU"
    return str(device.get("name") or device["type"])


def _families(config: AnalyzeConfig) -> dict[str, str]:
    """``{method: drafter family}`` of the runs, from the method table and
    ``--method-family``; a method neither knows is refused in one line. A manifest that
    cannot be read is left to the input checks."""
    out = {}
    for run in config.runs:
        try:
            manifest = json.loads((run / MANIFEST).read_text(encoding="utf-8"))
            method = str((manifest.get("speculative") or {}).get("method", "unknown"))
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        out[method] = family_of(method, config.method_families)
    return out


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


def _prompt_directions(config: AnalyzeConfig) -> dict[str, str]:
    """``{prompt_id: tags.direction}`` of ``config.prompts`` (source-target languages of
    a cross-lingual prompt, e.g. ``en-ja``: translate English into Japanese)."""
    from tokenlens.prompts import read_prompts

    assert config.prompts is not None
    out = {}
    for prompt in read_prompts(config.prompts):
        tags = prompt.tags if isinstance(prompt.tags, dict) else {}
        if isinstance(tags.get("direction"), str):
            out[prompt.id] = tags["direction"]
    return out


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


def canonical_order(paths: Sequence[Path]) -> tuple[Path, ...]:
    """The runs sorted by method, k and signature, then directory name and full path.

    Everything the analysis writes follows the order of its runs (``runs[]``, the
    merged signature's ``draft:a+b``, the rows of tokens.parquet, tables.md), so
    ``analyze A B`` and ``analyze B A`` must see one order to give one output. A
    manifest that cannot be read sorts first; the input checks refuse it next.
    """

    def key(path: Path) -> tuple[str, int, str, str, str]:
        try:
            manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
            method = str((manifest.get("speculative") or {}).get("method", ""))
            k, signature = manifest_k(manifest), str(manifest.get("signature", ""))
        except (OSError, ValueError, TypeError, AttributeError):
            method, k, signature = "", 0, ""
        return method, k, signature, path.resolve().name, str(path.resolve())

    return tuple(sorted(paths, key=key))


def _labels(paths: Sequence[Path]) -> list[str]:
    """Directory names, made unique with ``#i`` where two runs share one."""
    names = [p.resolve().name or str(p) for p in paths]
    return [n if names.count(n) == 1 else f"{n}#{i}" for i, n in enumerate(names)]


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
