"""Run a bench plan: warm-up and measured repeats per case, one engine per model+method+k.

Each finished case leaves ``runs/<case>/`` (a run directory of its first measured
repeat, with events) and ``runs/<case>/case.json`` (its results row); ``results.csv``
and ``results.md`` are rewritten from those after every case. The HTML report sits a
stage above the bench: the caller (the CLI, the demo) writes it from those files. A bench
interrupted at case N therefore resumes at case N: finished cases are read back, never
re-run. Acceptance figures are vLLM's counters differenced around the measured repeats
of the case; speed is output tokens (characters, UTF-8 bytes) over the wall time of
each repeat's generate call.

This module measures; what each case runs is :mod:`tokenlens.bench.config`'s, the
output directory and its resumption :mod:`tokenlens.bench.output`'s, and the numbers
of a measured case (its repeats, its row, the speedups) :mod:`tokenlens.bench.rows`'.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokenlens.bench.check import validated_plan
from tokenlens.bench.config import (
    BenchConfig,
    BenchResult,
    case_jobs,
    engine_config,
    sampling_config,
    trace_config,
)
from tokenlens.bench.output import RUNS, BenchOutput
from tokenlens.bench.plan import BASELINE, Case, Plan
from tokenlens.bench.rows import Repeat, case_row, plain_result, prefix_cache_note
from tokenlens.bench.steps import step_split
from tokenlens.bench_results import RESULTS_CSV, RESULTS_MD, Row
from tokenlens.capture.events import load_id_map
from tokenlens.capture.summary import served_engine_facts
from tokenlens.engine.backend import Backend
from tokenlens.engine.config import PromptJob
from tokenlens.engine.results import GenerationResult, SpecCounters
from tokenlens.engine.runner import Engine
from tokenlens.engine.server import ServerClient
from tokenlens.errors import TokenlensError
from tokenlens.progress import SILENT, Progress
from tokenlens.rundir import CAPTURE, RunWriter, finalize, requests_table
from tokenlens.signature import make_signature, parse_signature
from tokenlens.trace import (
    StartBackend,
    build_engine_config,
    installed_vllm,
    manifest_for,
    precheck_capture,
    reported_per_request,
    served_manifest,
)


def measure(
    bench: BenchOutput,
    case: Case,
    generate: Callable[[list[PromptJob]], GenerationResult],
    counters: Callable[[], SpecCounters],
) -> tuple[list[Repeat], GenerationResult, list[tuple[float, float]]]:
    """Warm-ups, then repeats; returns them, the first repeat's full result and the
    repeats' wall-clock windows (where the engine reports them: the step timer's lines
    inside them are the case's)."""
    for w in range(bench.plan.warmup):
        generate(case_jobs(bench.plan, case, f"w{w}", bench.plan.warmup_tokens))
    before = counters()
    results = [generate(case_jobs(bench.plan, case, f"r{r}")) for r in range(bench.plan.repeats)]
    total = counters() - before
    repeats = [Repeat.of(res.requests, res.wall_seconds, res.counters, res.info) for res in results]
    summed = sum((r.counters for r in repeats), SpecCounters())
    if summed != total:
        raise TokenlensError(
            f"case {case.case_id}: per-repeat counters {summed} do not add up to the "
            f"case's counter difference {total}: is another client using the engine?"
        )
    windows = [
        (float(r.info["started_at"]), float(r.info["ended_at"]))
        for r in results
        if "started_at" in r.info and "ended_at" in r.info
    ]
    return repeats, results[0], windows


def run_case(bench: BenchOutput, case: Case, backend: Backend, capture_dir: Path | None) -> Row:
    """Measure ``case`` on ``backend``, write its run directory, return its row."""
    plan, config = bench.plan, bench.config
    sampling = sampling_config(plan)
    repeats, first, windows = measure(
        bench,
        case,
        lambda jobs: backend.generate(jobs, sampling, case.concurrency),
        backend.counters,
    )
    tconf = trace_config(plan, case, config.out, config.cache)
    if isinstance(backend, ServerClient):
        manifest = served_manifest(
            tconf, list(case.prompts), backend, config.server, config.server_trace_dir
        )
    else:
        manifest = manifest_for(tconf, list(case.prompts), first.vllm_version)
    manifest["argv"] = list(config.argv)
    engine = backend.info.get("engine")
    if engine is None and capture_dir is not None:
        engine = served_engine_facts(capture_dir)
    manifest["engine"] = engine  # how the engine ran (tokenlens.engine.facts)
    steps = step_split(capture_dir, windows, case.method.method != BASELINE)
    manifest["bench_env"] = dict(case.method.env)
    manifest["step_split"] = steps
    return write_run(
        bench, case, manifest, first, capture_dir, repeats, backend.info.get("dtype"), steps
    )


def write_run(
    bench: BenchOutput,
    case: Case,
    manifest: dict[str, Any],
    first: GenerationResult,
    capture_dir: Path | None,
    repeats: Sequence[Repeat],
    dtype: str | None,
    steps: dict[str, Any] | None = None,
) -> Row:
    """The case's run directory (its first measured repeat) and its results row."""
    run_dir = bench.out / RUNS / case.slug
    shutil.rmtree(run_dir, ignore_errors=True)
    if case.model.quantization is not None or case.model.dtype != "auto":
        # Quantization and dtype change what is measured: they enter the signature.
        fields = parse_signature(manifest["signature"])
        fields.update(quant=case.model.quantization or "none", dtype=case.model.dtype)
        manifest["signature"] = make_signature(fields)
    manifest["bench"] = {
        "case_id": case.case_id,
        "model_name": case.model.name,
        "quantization": case.model.quantization,
        "dtype": case.model.dtype,
        "plan": bench.plan.name,
        "plan_sha256": bench.plan.sha256,
        "repeat_recorded": 0,
        "repeats": [
            {
                "wall_seconds": r.wall_s,
                "output_tokens": r.tokens,
                "output_chars": r.chars,
                "output_bytes": r.bytes,
                "counters": r.counters.to_json(),
                "per_request_counters": (r.reported.to_json() if r.reported is not None else None),
                "prefix_cache": r.prefix_cache,
            }
            for r in repeats
        ],
        "prefix_cache": prefix_cache_note(repeats),
    }
    bench.prefix_cache[case.case_id] = manifest["bench"]["prefix_cache"]
    langs = {p.id: p.lang for p in case.prompts}
    pairs = {p.id: p.pair for p in case.prompts}
    prefix = f"{case.slug}.r0."
    # The engine reports our per-repeat request ids; the run directory uses prompt ids.
    requests = [replace(r, prompt_id=r.prompt_id.removeprefix(prefix)) for r in first.requests]
    id_map = None
    if capture_dir is not None:
        if bench.config.server is not None:  # the client's ids are the map's keys
            id_map = {f"{prefix}{p.id}": p.id for p in case.prompts}
        else:
            id_map = {
                internal: rid[len(prefix) :]
                for internal, rid in load_id_map(capture_dir).items()
                if rid.startswith(prefix)
            }

    writer = RunWriter(run_dir, manifest, overwrite=True)
    done = finalize(
        writer,
        requests_table(requests, langs, pairs),
        counters=first.counters,
        capture=capture_dir,
        id_map=id_map,
        keep=set(langs),
        reported=reported_per_request(requests),
        extra_manifest={
            "vllm_version": first.vllm_version,
            "timing": {
                "wall_seconds": first.wall_seconds,
                "output_tokens": sum(len(r.output_token_ids) for r in first.requests),
            },
            "dtype": dtype,
        },
        live=True,  # the engine is still running: wait for its writer thread
    )
    if done.problems:
        raise TokenlensError(
            f"case {case.case_id}: events do not match vLLM's counters "
            f"({'; '.join(done.problems)}); run kept at {run_dir}"
        )
    rel = str(run_dir.relative_to(bench.out))
    return case_row(
        case,
        bench.plan,
        repeats,
        rel,
        writer.manifest["signature"],
        dtype,
        manifest.get("engine"),
        steps,
        session=bench.session,
    )


def _groups(cases: Sequence[Case]) -> list[list[Case]]:
    """Consecutive cases that share an engine."""
    groups: list[list[Case]] = []
    for case in cases:
        if groups and groups[-1][0].engine_key == case.engine_key:
            groups[-1].append(case)
        else:
            groups.append([case])
    return groups


def _requests_total(plan: Plan, cases: Sequence[Case]) -> int:
    return sum((plan.warmup + plan.repeats) * len(c.prompts) for c in cases)


def run_bench(
    config: BenchConfig, progress: Progress = SILENT, start: StartBackend = Engine
) -> BenchResult:
    """Run (or resume) every case of the plan and write results.csv and results.md.

    Locally, one engine per group of consecutive cases that share model, method and k
    (made by ``start``: vLLM's engine unless a test passes a fake); with
    ``config.server``, the running ``vllm serve`` (:func:`_server`). Either is a
    :class:`~tokenlens.engine.backend.Backend`, measured the same way.
    """
    plan = validated_plan(config.plan, require_vllm=config.server is None)
    if config.server is not None and config.compare_plain:
        raise TokenlensError(
            "--compare-plain starts local engines without the plugin; it cannot be used "
            "with --server (run the server without TOKENLENS_TRACE_DIR and bench it again)"
        )
    server = _server(config, plan, progress) if config.server is not None else None
    if server is None:  # a vLLM the hook cannot trace: one line before anything is written
        precheck_capture(trace_config(plan, plan.cases[0], config.out, config.cache), progress)
    bench = BenchOutput(config, plan, progress)
    resumed = bench.prepare(server.version() if server is not None else installed_vllm())
    pending = bench.pending()
    if server is None:
        for case in pending:  # build embedded models before the progress bar starts
            build_engine_config(trace_config(plan, case, config.out, config.cache), progress)
    progress.stage("bench", total=_requests_total(plan, pending), unit="req")
    for group in _groups(pending):
        backend, capture_dir = (
            (server, config.server_trace_dir)
            if server is not None
            else _engine(bench, group[0], start)
        )
        with backend:
            for case in group:
                row = run_case(bench, case, backend, capture_dir)
                bench.finish_case(case, row)
                progress.note(
                    f"done {case.case_id}: {row['tok_s']:.2f} tok/s{_cached(bench, case)}"
                )
    if server is None:
        run_plain(bench, start)
    return _finish(bench, resumed)


def run_plain(bench: BenchOutput, start: StartBackend) -> None:
    """``--compare-plain``: the chosen cases again on engines without the tokenlens
    plugin (``VLLM_PLUGINS=""``, no trace directory), same plan and settings; each
    case's tok/s goes to ``runs/<case>/plain.json`` and beside its traced tok/s."""
    chosen = bench.plain_pending()
    if not chosen:
        return
    plan, config = bench.plan, bench.config
    sampling = sampling_config(plan)
    bench.progress.stage("plain", total=_requests_total(plan, chosen), unit="req")
    for group in _groups(chosen):
        first = group[0]
        slug = f"{first.model.name}.{first.label}.plain"
        econf = engine_config(plan, first, None, config.cache)
        log = config.out / "logs" / f"{slug}.log"
        bench.progress.note(f"starting vLLM without tokenlens for {slug} (log: {log})")
        with start(econf, log, bench.progress) as backend:
            for case in group:

                def generate(jobs: list[PromptJob], c: Case = case) -> GenerationResult:
                    return backend.generate(jobs, sampling, c.concurrency)

                repeats, _, _ = measure(bench, case, generate, backend.counters)
                data = plain_result(repeats, backend.info.get("engine"), bench.session)
                bench.finish_plain(case, data)
                bench.progress.note(f"plain {case.case_id}: {data['tok_s']:.2f} tok/s")


def _cached(bench: BenchOutput, case: Case) -> str:
    """`` (its repeats hit the prefix cache: ...)`` when they did, else nothing."""
    note = bench.prefix_cache.get(case.case_id) or {}
    if not note.get("hit"):
        return ""
    return (
        f" (its repeats hit vLLM's prefix cache: {note['hit_tokens']} of "
        f"{note['queried_tokens']} prompt tokens cached; timings include cached prefills)"
    )


def _engine(bench: BenchOutput, first: Case, start: StartBackend) -> tuple[Backend, Path]:
    """The local engine of ``first``'s group and the capture directory it records into."""
    config, plan = bench.config, bench.plan
    engine_slug = f"{first.model.name}.{first.label}"
    capture_dir = config.out / CAPTURE / engine_slug
    shutil.rmtree(capture_dir, ignore_errors=True)
    econf = engine_config(plan, first, capture_dir, config.cache)
    log = config.out / "logs" / f"{engine_slug}.log"
    bench.progress.note(f"starting vLLM for {engine_slug} (log: {log})")
    return start(econf, log, bench.progress), capture_dir


def _server(config: BenchConfig, plan: Plan, progress: Progress) -> ServerClient:
    """A running ``vllm serve``: streaming for timing, /metrics for acceptance.

    The server runs one configuration, so the plan must describe exactly one engine
    (one model, one method, one k): those entries label the rows. vLLM's counters are
    differenced around each repeat; they are exact only if nobody else uses the server.
    """
    keys = {c.engine_key for c in plan.cases}
    if len(keys) != 1:
        raise TokenlensError(
            f"{config.plan}: --server measures the one configuration the server runs, "
            f"but the plan has {len(keys)} model/method/k combinations"
        )
    client = ServerClient(
        config.server or "",
        chat_template_kwargs={"enable_thinking": plan.sampling.thinking},
        stream=True,
        progress=progress,
    )
    client.model()  # reachable and serving, before the output directory is touched
    return client


def _finish(bench: BenchOutput, resumed: int) -> BenchResult:
    bench.write_info(status="complete")
    bench.write_tables()
    return BenchResult(
        out=bench.out,
        results_csv=bench.out / RESULTS_CSV,
        results_md=bench.out / RESULTS_MD,
        rows=bench.ordered_rows(),
        resumed=resumed,
    )
