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

The kernels live in :mod:`~tokenlens.replay.steps`, :mod:`~tokenlens.replay.ngram`,
:mod:`~tokenlens.replay.passes` and :mod:`~tokenlens.replay.predictions`; what each
run directory holds is built in :mod:`~tokenlens.replay.written`. Which methods a
replay reproduces, and by which pass, is the method table's
(:data:`tokenlens.engine.methods.METHODS`, ``replay``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tokenlens.engine.config import EngineConfig
from tokenlens.engine.methods import DRAFTER_PASS, METHODS, NGRAM_PASS, REPLAYABLE
from tokenlens.engine.ngram_kernel import NgramSettings
from tokenlens.engine.passes import PassRequest, PassResult
from tokenlens.engine.runner import Engine
from tokenlens.errors import TokenlensError
from tokenlens.models.embedded import DRAFTER
from tokenlens.progress import SILENT, Progress
from tokenlens.replay import ngram, passes
from tokenlens.replay.passes import StartWorker, Worker
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
from tokenlens.replay.written import events_table, replay_manifest
from tokenlens.rundir import RunWriter, finalize
from tokenlens.trace.models import model_identity

SCORING_BATCH_TOKENS = 2048


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


def _pass(method: str) -> str | None:
    """The pass that replays ``method`` (the method table's), None when none does."""
    row = METHODS.get(method)
    return row.replay if row is not None else None


def _passes(config: ReplayConfig) -> set[str | None]:
    return {_pass(m) for m in config.methods}


def _ngram_defaults() -> dict[str, int]:
    """The n-gram method's defaults as tokenlens passes them (the method table's)."""
    (row,) = [m for m in METHODS.values() if m.replay == NGRAM_PASS]
    return {key: int(value) for key, value in row.defaults.items()}


def _check(config: ReplayConfig) -> None:
    unknown = [m for m in config.methods if m not in REPLAYABLE]
    if unknown:
        raise TokenlensError(f"replay knows --method {' and '.join(REPLAYABLE)}, not {unknown[0]}")
    if not config.ks or min(config.ks) < 1:
        raise TokenlensError("--k needs positive integers, e.g. --k 1,2,3")
    unknown_opts = set(config.ngram_options) - set(_ngram_defaults())
    if unknown_opts:
        raise TokenlensError(f"unknown n-gram option {sorted(unknown_opts)[0]}")


def _ngram_options(config: ReplayConfig, source: Source) -> dict[str, int]:
    """The source's own n-gram settings when it is an n-gram run, else vLLM's defaults."""
    spec = source.manifest["speculative"]
    own = (spec.get("options") or {}) if _pass(source.method) == NGRAM_PASS else {}
    opts = {key: int(own.get(key, value)) for key, value in _ngram_defaults().items()}
    return {**opts, **config.ngram_options}


def _drafter_name(config: ReplayConfig, source: Source) -> str:
    if config.draft_model is not None:
        return config.draft_model
    if _pass(source.method) == DRAFTER_PASS and source.manifest["speculative"].get("model"):
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
    if _pass(method) == NGRAM_PASS:
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
        if _pass(method) != DRAFTER_PASS:
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


def _ngram_settings(config: ReplayConfig, source: Source) -> NgramSettings:
    opts = _ngram_options(config, source)
    return NgramSettings(
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
        if NGRAM_PASS in _passes(config):  # vLLM is imported there already
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
            drafted = [m for m in config.methods if _pass(m) == DRAFTER_PASS]
            rows, _, partial = _step_all(config, source, pred, drafted)
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
    if NGRAM_PASS in _passes(config):
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
    if _passes(config) == {NGRAM_PASS}:
        progress.note("n-gram proposals (vLLM's kernel)")
        _ngram_pass(config, source, pred, None)
    if DRAFTER_PASS in _passes(config):
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
        if _pass(method) == DRAFTER_PASS:
            drafter = model_identity(_drafter_name(config, source))[0]
        for k in config.ks:
            path = config.out / f"{method}-k{k}"
            by_request = {
                rid: _fill_branches(rows[(method, k, rid)], pred.branches.get(rid, {}))
                for rid in order
            }
            options = _ngram_options(config, source) if _pass(method) == NGRAM_PASS else {}
            manifest = replay_manifest(source, method, k, drafter, options, config.argv)
            writer = RunWriter(path, manifest, overwrite=True)
            problems = finalize(
                writer,
                source.run.requests,
                events_table(by_request, order),
                counters_source="derived",
                extra_manifest={"replay": {**info, "wall_seconds_all_cells": seconds}},
            ).problems
            if problems:  # derived counters always reconcile: this is a bug, say so
                raise TokenlensError(f"{path}: replayed events do not add up: {problems}")
            runs.append(path)
    return runs
