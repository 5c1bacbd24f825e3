"""``tokenlens replay``: run directories for every (method, k) from one greedy run.

Order of work, so that each engine starts at most once:

1. n-gram: vLLM's kernel at every prefix (a subprocess, seconds).
2. draft model: one drafter engine; the teacher-forced pass, the steps of every k,
   then (``branch_drafts``) the drafter's continuations after rejected drafts.
3. the steps of every (method, k); where a step's drafts reach past the output's end
   and the source's events do not show the target's tokens there, one target engine
   computes them, and those requests are stepped again.
4. one run directory per (method, k) through :func:`tokenlens.rundir.finalize`,
   with counts derived from the events (there are no vLLM counters to reconcile).

Why one file over 450 lines: it is that order of work and nothing else (the engines
it starts, the passes it asks of them, and the run directories it writes from them);
the kernels live in :mod:`~tokenlens.replay.steps`, :mod:`~tokenlens.replay.ngram`,
:mod:`~tokenlens.replay.passes` and :mod:`~tokenlens.replay.predictions`.
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tokenlens import __version__
from tokenlens.capture.events import EVENTS_SCHEMA
from tokenlens.engine.config import EngineConfig
from tokenlens.engine.runner import Engine
from tokenlens.errors import TokenlensError
from tokenlens.models.embedded import DRAFTER
from tokenlens.progress import SILENT, Progress
from tokenlens.replay import ngram, passes
from tokenlens.replay.passes import PassRequest, PassResult, StartWorker, Worker
from tokenlens.replay.predictions import PREDICTIONS, Predictions, predictions_table
from tokenlens.replay.source import Source, SourceRequest, read_source, resolve_recorded_model
from tokenlens.replay.steps import (
    Branch,
    DraftFn,
    DraftModelView,
    NeedLookahead,
    NgramView,
    Row,
    Tokens,
    replay_request,
)
from tokenlens.replay.trust import exactness
from tokenlens.rundir import RunWriter, finalize, now_iso
from tokenlens.signature import make_signature, parse_signature
from tokenlens.trace.models import model_identity

METHODS = ("draft_model", "ngram")
SCORING_BATCH_TOKENS = 2048
# vLLM's n-gram defaults as tokenlens passes them (SpeculativeSpec.to_vllm)
NGRAM_DEFAULTS = {"prompt_lookup_min": 1, "prompt_lookup_max": 4}
# Manifest keys of the source that describe its generation, not the replay.
_NOT_INHERITED = (
    "signature",
    "status",
    "timing",
    "reconciliation",
    "finished_at",
    "created_at",
    "argv",
    "speculative",
    "bench",
    "capture_gaps",
    "salvaged_at",
    "counters_source",
)


@dataclass(frozen=True)
class ReplayConfig:
    """What to replay from where, and where the run directories go."""

    source: Path
    out: Path
    methods: tuple[str, ...] = ("draft_model",)
    ks: tuple[int, ...] = (1, 2, 3, 4, 5)
    draft_model: str | None = None
    ngram_options: dict[str, int] = field(default_factory=dict)
    dtype: str | None = None
    max_model_len: int | None = None
    # Also compute the identities of drafts proposed after a rejected one (vLLM never
    # judges them): one more drafter request per rejection. Off: they are -1.
    branch_drafts: bool = False
    cache: Path | None = None
    overwrite: bool = False
    argv: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReplayResult:
    runs: list[Path]
    predictions: Path
    wall_seconds: float
    info: dict[str, Any]


def _check(config: ReplayConfig) -> None:
    unknown = [m for m in config.methods if m not in METHODS]
    if unknown:
        raise TokenlensError(f"replay knows --method {' and '.join(METHODS)}, not {unknown[0]}")
    if not config.ks or min(config.ks) < 1:
        raise TokenlensError("--k needs positive integers, e.g. --k 1,2,3")
    unknown_opts = set(config.ngram_options) - set(NGRAM_DEFAULTS)
    if unknown_opts:
        raise TokenlensError(f"unknown n-gram option {sorted(unknown_opts)[0]}")


def _ngram_options(config: ReplayConfig, source: Source) -> dict[str, int]:
    """The source's own n-gram settings when it is an n-gram run, else vLLM's defaults."""
    own = (source.manifest["speculative"].get("options") or {}) if source.method == "ngram" else {}
    opts = {key: int(own.get(key, value)) for key, value in NGRAM_DEFAULTS.items()}
    return {**opts, **config.ngram_options}


def _drafter_name(config: ReplayConfig, source: Source) -> str:
    if config.draft_model is not None:
        return config.draft_model
    if source.method == "draft_model" and source.manifest["speculative"].get("model"):
        return str(source.manifest["speculative"]["model"])
    return DRAFTER.key


def _engine(
    config: ReplayConfig, source: Source, model: str, dtype: str, progress: Progress
) -> EngineConfig:
    kmax = max(config.ks)
    seed = int((source.manifest.get("sampling") or {}).get("seed", 0))
    # Room for the look-ahead past a sequence that ends at the run's max_model_len.
    # prompt_logprobs materialise every scored position's full-vocabulary logprobs
    # (~0.6 MB each for Qwen's 151,936 ids): a smaller step budget than vLLM's CPU
    # default (4096) bounds that memory; chunking only reorders floating-point sums.
    return EngineConfig(
        model=resolve_recorded_model(model, config.cache, progress),
        dtype=dtype,
        max_model_len=_max_model_len(config, source) + kmax + 1,
        seed=seed,
        extra={"max_num_batched_tokens": SCORING_BATCH_TOKENS},
    )


def _max_model_len(config: ReplayConfig, source: Source) -> int:
    return config.max_model_len or source.max_model_len


def _dtype(config: ReplayConfig, source: Source) -> str:
    dtype = config.dtype or source.dtype
    if not dtype:
        raise TokenlensError(
            f"{source.run.path}: the manifest records no dtype; pass --dtype (the trace's)"
        )
    return dtype


def _tokens(req: SourceRequest, pred: Predictions) -> Tokens:
    ahead = pred.lookahead.get(req.request_id, req.lookahead)
    return Tokens(req.request_id, len(req.prompt_ids), req.output, ahead)


def _draft_fn(method: str, req: SourceRequest, pred: Predictions) -> DraftFn:
    if method == "ngram":
        return NgramView(pred.ngram[req.request_id])
    scored = pred.drafter[req.request_id]
    p = len(req.prompt_ids)
    return DraftModelView(
        output=req.output,
        argmax=scored.argmax[p : p + len(req.output)],
        continuation=scored.generated,
    )


Cells = dict[tuple[str, int, str], list[Row]]


def _step_all(
    config: ReplayConfig, source: Source, pred: Predictions, methods: Sequence[str]
) -> tuple[Cells, dict[str, int], Cells]:
    """Rows per (method, k, request); how many look-ahead tokens each request lacks; and
    the rows before the undetermined last step of those requests."""
    mml = _max_model_len(config, source)
    rows: Cells = {}
    partial: Cells = {}
    need: dict[str, int] = {}
    for method in methods:
        for req in source.requests:
            drafts = _draft_fn(method, req, pred)
            tokens = _tokens(req, pred)
            for k in config.ks:
                try:
                    rows[(method, k, req.request_id)] = replay_request(tokens, drafts, k, mml)
                except NeedLookahead as missing:
                    need[req.request_id] = max(need.get(req.request_id, 0), missing.count)
                    partial[(method, k, req.request_id)] = missing.rows
    return rows, need, partial


def _fill_branches(rows: list[Row], known: dict[int, PassResult]) -> list[Row]:
    out = []
    for row in rows:
        if isinstance(row.draft, Branch):
            found = known.get(row.draft.point)
            cont = found.generated if found is not None else ()
            draft = cont[row.draft.offset] if row.draft.offset < len(cont) else -1
            row = replace(row, draft=draft)
        out.append(row)
    return out


def _branch_requests(
    source: Source, pred: Predictions, rows: Cells
) -> list[tuple[str, int, PassRequest]]:
    """One drafter request per branch point: its continuation, as long as any k needs."""
    wanted: dict[tuple[str, int], int] = {}
    for (method, _, rid), request_rows in rows.items():
        if method != "draft_model":
            continue
        for row in request_rows:
            if isinstance(row.draft, Branch):
                key = (rid, row.draft.point)
                wanted[key] = max(wanted.get(key, 0), row.draft.offset + 1)
    by_id = {r.request_id: r for r in source.requests}
    out = []
    for (rid, point), length in sorted(wanted.items()):
        req = by_id[rid]
        first = pred.drafter[rid].argmax[len(req.prompt_ids) + point]
        tokens = req.prompt_ids + req.output[:point] + (first,)
        out.append((rid, point, PassRequest(tokens=tokens, max_tokens=length)))
    return out


def _ngram_settings(config: ReplayConfig, source: Source) -> ngram.NgramSettings:
    opts = _ngram_options(config, source)
    return ngram.NgramSettings(
        k=max(config.ks),
        prompt_lookup_min=opts["prompt_lookup_min"],
        prompt_lookup_max=opts["prompt_lookup_max"],
        max_model_len=_max_model_len(config, source),
    )


def _ngram_pass(
    config: ReplayConfig, source: Source, pred: Predictions, engine: Worker | None
) -> None:
    """vLLM's n-gram kernel at every prefix (in ``engine``'s worker if one is up)."""
    sequences = [(r.sequence, len(r.prompt_ids)) for r in source.requests]
    found = ngram.proposals(sequences, _ngram_settings(config, source), engine)
    pred.ngram = {r.request_id: p for r, p in zip(source.requests, found, strict=True)}


def _drafter_passes(
    config: ReplayConfig,
    source: Source,
    pred: Predictions,
    dtype: str,
    progress: Progress,
    start: StartWorker,
) -> dict[str, Any]:
    """The drafter engine: n-gram kernel if wanted, teacher-forced pass, branch pass."""
    kmax = max(config.ks)
    name = _drafter_name(config, source)
    econf = _engine(config, source, name, dtype, progress)
    log = config.out / "logs" / "drafter.log"
    info: dict[str, Any] = {"model": name}
    progress.note(f"starting vLLM with the drafter {name} (log: {log})")
    with start(econf, log, progress) as engine:
        if "ngram" in config.methods:  # vLLM is imported there already
            _ngram_pass(config, source, pred, engine)
        t0 = time.perf_counter()
        requests = [
            PassRequest(req.sequence, max_tokens=max(1, kmax - 1), score_prompt=True)
            for req in source.requests
        ]
        progress.stage("drafter pass", total=len(requests), unit="req")
        for req, scored in zip(source.requests, passes.run(engine, requests), strict=True):
            pred.drafter[req.request_id] = scored
        info["teacher_forced_seconds"] = time.perf_counter() - t0
        info["teacher_forced_tokens"] = sum(len(r.tokens) for r in requests)
        if config.branch_drafts:
            # A step that reaches past the output's end has no rejected draft before
            # it, so the rows before it (partial) hold every branch point.
            rows, _, partial = _step_all(config, source, pred, ["draft_model"])
            branch = _branch_requests(source, pred, {**partial, **rows})
            t0 = time.perf_counter()
            progress.stage("branch pass", total=len(branch), unit="req")
            results = passes.run(engine, [b[2] for b in branch])
            for (rid, point, _), res in zip(branch, results, strict=True):
                pred.branches.setdefault(rid, {})[point] = res
            info["branch_requests"] = len(branch)
            info["branch_seconds"] = time.perf_counter() - t0
    return info


def _lookahead_pass(
    config: ReplayConfig,
    source: Source,
    pred: Predictions,
    need: dict[str, int],
    dtype: str,
    progress: Progress,
    start: StartWorker,
) -> dict[str, Any]:
    """The target engine: its greedy tokens after the end of the outputs that need them."""
    kmax = max(config.ks)
    model = str(source.manifest["model"])
    econf = _engine(config, source, model, dtype, progress)
    log = config.out / "logs" / "target.log"
    chosen = [r for r in source.requests if r.request_id in need]
    progress.note(f"starting vLLM with the target for {len(chosen)} look-ahead(s) (log: {log})")
    with start(econf, log, progress) as engine:
        t0 = time.perf_counter()
        progress.stage("look-ahead pass", total=len(chosen), unit="req")
        results = passes.run(engine, [PassRequest(r.sequence, max_tokens=kmax) for r in chosen])
        seconds = time.perf_counter() - t0
    disagreements = 0
    for req, res in zip(chosen, results, strict=True):
        known = req.lookahead
        if tuple(res.generated[: len(known)]) != known:
            disagreements += 1  # a near-tie between the verify and the prefill paths
        # The source's verified tokens first: they came out of the path a trace takes.
        pred.lookahead[req.request_id] = known + res.generated[len(known) :]
        pred.lookahead_margin[req.request_id] = res.generated_margin
        pred.lookahead_from[req.request_id] = "target pass"
    return {
        "requests": len(chosen),
        "seconds": seconds,
        "disagreeing_with_source_events": disagreements,
    }


def _events(rows_by_request: dict[str, list[Row]], order: Sequence[str]) -> pa.Table:
    cols: dict[str, list[Any]] = {name: [] for name in EVENTS_SCHEMA.names}
    for rid in order:
        for row in rows_by_request.get(rid, []):
            assert not isinstance(row.draft, Branch)
            cols["request_id"].append(rid)
            cols["step"].append(row.step)
            cols["position"].append(row.position)
            cols["draft_token_id"].append(row.draft)
            cols["accepted"].append(row.accepted)
            cols["emitted_token_id"].append(row.emitted)
            cols["output_index"].append(row.output_index)
    return pa.table(cols, schema=EVENTS_SCHEMA)


def replayed_signature(source_signature: str, method: str, k: int, drafter: str | None) -> str:
    """The source's signature with method, k and drafter replaced, and ``replayed:<hash>``.

    The hash names the source (first 12 hex of the SHA-256 of its signature), so two
    replays are comparable only if they come from the same run, and no replayed
    signature equals a traced one.
    """
    fields: dict[str, Any] = dict(parse_signature(source_signature))
    fields.update(method=method, k=k, draft=drafter)
    fields["replayed"] = hashlib.sha256(source_signature.encode()).hexdigest()[:12]
    return make_signature(fields)


def _manifest(
    config: ReplayConfig, source: Source, method: str, k: int, drafter: str | None
) -> dict[str, Any]:
    base = {k_: v for k_, v in source.manifest.items() if k_ not in _NOT_INHERITED}
    options = _ngram_options(config, source) if method == "ngram" else {}
    return {
        **base,
        "signature": replayed_signature(str(source.manifest["signature"]), method, k, drafter),
        "tokenlens_version": __version__,
        "speculative": {
            "method": method,
            "model": drafter,
            "num_speculative_tokens": k,
            "options": options,
        },
        "created_at": now_iso(),
        "argv": list(config.argv) or sys.argv,
        "replayed_from": str(source.manifest["signature"]),
        "replay_source": str(source.run.path),
    }


def _prepare_out(config: ReplayConfig) -> list[Path]:
    dirs = [config.out / f"{m}-k{k}" for m in config.methods for k in config.ks]
    if not config.overwrite:
        taken = [d for d in dirs if (d / "manifest.json").exists()]
        if taken:
            raise TokenlensError(f"{taken[0]} already holds a run (use --overwrite to replace it)")
    config.out.mkdir(parents=True, exist_ok=True)
    return dirs


def run_replay(
    config: ReplayConfig, progress: Progress = SILENT, start: StartWorker = Engine
) -> ReplayResult:
    """Replay ``config.source`` for every method and k; returns the run directories.

    ``start`` makes the drafter's and the target's engines (vLLM's ``Engine`` unless a
    test passes a fake).
    """
    _check(config)
    t_start = time.perf_counter()
    source = read_source(config.source)
    if "ngram" in config.methods:
        ngram.check_runner(source.manifest, str(config.source))
    dtype = _dtype(config, source)
    _prepare_out(config)
    mml = _max_model_len(config, source)
    pred = Predictions()
    info: dict[str, Any] = {
        "max_model_len": mml,
        "max_model_len_recorded": source.max_model_len_recorded or config.max_model_len is not None,
        "dtype": dtype,
        **exactness(dtype),
        "branch_drafts": config.branch_drafts,
    }
    if "ngram" in config.methods and "draft_model" not in config.methods:
        progress.note("n-gram proposals (vLLM's kernel)")
        _ngram_pass(config, source, pred, None)
    if "draft_model" in config.methods:
        info["drafter"] = _drafter_passes(config, source, pred, dtype, progress, start)
    rows, need, _ = _step_all(config, source, pred, config.methods)
    if need:
        info["lookahead"] = _lookahead_pass(config, source, pred, need, dtype, progress, start)
        again = replace(source, requests=tuple(r for r in source.requests if r.request_id in need))
        more, still, _ = _step_all(config, again, pred, config.methods)
        if still:
            raise TokenlensError(f"look-ahead pass left {len(still)} request(s) undetermined")
        rows.update(more)
    else:
        info["lookahead"] = {"requests": 0}
    pq.write_table(predictions_table(source.requests, pred), config.out / PREDICTIONS)
    runs = _write_runs(config, source, rows, pred, info, time.perf_counter() - t_start)
    return ReplayResult(
        runs=runs,
        predictions=config.out / PREDICTIONS,
        wall_seconds=time.perf_counter() - t_start,
        info=info,
    )


def _write_runs(
    config: ReplayConfig,
    source: Source,
    rows: Cells,
    pred: Predictions,
    info: dict[str, Any],
    seconds: float,
) -> list[Path]:
    order = [r.request_id for r in source.requests]
    runs = []
    for method in config.methods:
        drafter = None
        if method == "draft_model":
            drafter = model_identity(_drafter_name(config, source))[0]
        for k in config.ks:
            path = config.out / f"{method}-k{k}"
            by_request = {
                rid: _fill_branches(rows[(method, k, rid)], pred.branches.get(rid, {}))
                for rid in order
            }
            writer = RunWriter(path, _manifest(config, source, method, k, drafter), overwrite=True)
            problems = finalize(
                writer,
                source.run.requests,
                _events(by_request, order),
                counters_source="derived",
                extra_manifest={"replay": {**info, "wall_seconds_all_cells": seconds}},
            ).problems
            if problems:  # derived counters always reconcile: this is a bug, say so
                raise TokenlensError(f"{path}: replayed events do not add up: {problems}")
            runs.append(path)
    return runs
