"""Run a bench plan: warm-up and measured repeats per case, one engine per model+method+k.

Each finished case leaves ``runs/<case>/`` (a run directory of its first measured
repeat, with events) and ``runs/<case>/case.json`` (its results row); ``results.csv``
and ``results.md`` are rewritten from those after every case. The HTML report sits a
stage above the bench: the caller (the CLI, the demo) writes it from those files. A bench
interrupted at case N therefore resumes at case N: finished cases are read back, never
re-run. Acceptance figures are vLLM's counters differenced around the measured repeats
of the case; speed is output tokens (characters, UTF-8 bytes) over the wall time of
each repeat's generate call.
"""

from __future__ import annotations

import json
import platform
import shutil
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tokenlens import __version__
from tokenlens.bench.check import validated_plan
from tokenlens.bench.plan import BASELINE, Case, Plan
from tokenlens.bench_results import (
    BENCH_JSON,
    RESULTS_CSV,
    RESULTS_MD,
    Row,
    write_results,
)
from tokenlens.capture.events import load_id_map
from tokenlens.capture.summary import served_engine_facts
from tokenlens.engine.backend import Backend
from tokenlens.engine.config import EngineConfig, PromptJob, SamplingConfig
from tokenlens.engine.results import GeneratedRequest, GenerationResult, SpecCounters
from tokenlens.engine.runner import Engine, jobs_from_prompts
from tokenlens.engine.server import ServerClient
from tokenlens.errors import TokenlensError
from tokenlens.format_version import BENCH, check_readable, stamp
from tokenlens.progress import SILENT, Progress
from tokenlens.rundir import (
    CAPTURE,
    RunWriter,
    finalize,
    now_iso,
    requests_table,
    write_json_atomic,
)
from tokenlens.signature import make_signature, parse_signature
from tokenlens.trace import (
    StartBackend,
    TraceConfig,
    build_engine_config,
    installed_vllm,
    manifest_for,
    precheck_capture,
    reported_per_request,
    served_manifest,
)

CASE_JSON = "case.json"
RUNS = "runs"


@dataclass(frozen=True)
class BenchConfig:
    """Where the plan is, where results go, and what to measure against."""

    plan: Path
    out: Path
    server: str | None = None
    server_trace_dir: Path | None = None
    cache: Path | None = None
    restart: bool = False
    argv: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchResult:
    out: Path
    results_csv: Path
    results_md: Path
    rows: list[Row] = field(default_factory=list)
    resumed: int = 0


@dataclass(frozen=True)
class Repeat:
    """One measured repeat of a case."""

    wall_s: float
    tokens: int
    chars: int
    bytes: int
    ttft: list[float]
    counters: SpecCounters
    # The sum of vLLM's per-request spec-decode figures, where a server reports them.
    reported: SpecCounters | None = None
    # vLLM's prefix-cache counters over the repeat (prompt tokens looked up, found);
    # None where the backend does not report them (a server).
    prefix_cache: dict[str, int] | None = None

    @classmethod
    def of(
        cls,
        requests: Sequence[GeneratedRequest],
        wall: float,
        counters: SpecCounters,
        info: dict[str, Any] | None = None,
    ) -> Repeat:
        info = info or {}
        keys = ("prefix_cache_queries", "prefix_cache_hits")
        prefix = (
            {k.removeprefix("prefix_cache_"): int(info[k]) for k in keys}
            if all(k in info for k in keys)
            else None
        )
        return cls(
            wall_s=wall,
            tokens=sum(len(r.output_token_ids) for r in requests),
            chars=sum(len(r.output_text) for r in requests),
            bytes=sum(len(r.output_text.encode("utf-8")) for r in requests),
            ttft=[r.first_token_latency for r in requests if r.first_token_latency is not None],
            counters=counters,
            reported=_reported(requests),
            prefix_cache=prefix,
        )


def _reported(requests: Sequence[GeneratedRequest]) -> SpecCounters | None:
    """Per-request figures summed, if every request carried them."""
    if not requests or any(r.spec_decode is None for r in requests):
        return None
    return sum(
        (SpecCounters.from_request_metrics(r.spec_decode or {}) for r in requests),
        SpecCounters(),
    )


def sampling_config(plan: Plan) -> SamplingConfig:
    """Bench requests never ask for logprobs: they would cost time being measured."""
    s = plan.sampling
    return SamplingConfig(
        max_tokens=s.max_tokens or 256,
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=s.top_k,
        seed=s.seed,
        ignore_eos=s.ignore_eos,
    )


def trace_config(plan: Plan, case: Case, out: Path, cache: Path | None) -> TraceConfig:
    """The case as a trace: reuses the trace's model resolution and manifest."""
    m = case.method
    return TraceConfig(
        prompts=case.corpus.path,
        out=out,
        model=case.model.path,
        method=m.method,
        draft_model=m.draft_model,
        k=case.k if m.method != BASELINE else 3,
        spec_options=dict(m.options),
        engine_options=dict(case.model.engine),
        sampling=sampling_config(plan),
        concurrency=plan.concurrency,
        max_model_len=case.model.max_model_len,
        dtype=case.model.dtype,
        langs=(case.lang,),
        cap_tokens=plan.sampling.max_tokens,
        chat=plan.chat,
        cache=cache,
        load_format=case.model.load_format,
    )


def engine_config(plan: Plan, case: Case, trace_dir: Path, cache: Path | None) -> EngineConfig:
    """The engine of ``case`` (shared by every case with the same engine key).

    vLLM's prefix cache is off unless the plan's ``engine`` table turns it on: the
    repeats of a case send the same prompts, and with the cache every repeat after the
    first would skip its prefills, timing something no first request sees.
    """
    base = build_engine_config(trace_config(plan, case, trace_dir, cache))
    extra = {PREFIX_CACHING: False, **case.model.engine}
    if case.model.quantization is not None:
        extra["quantization"] = case.model.quantization
    return replace(
        base,
        trace_dir=str(trace_dir),
        chat_template_kwargs={"enable_thinking": plan.sampling.thinking},
        extra={**base.extra, **extra},
    )


PREFIX_CACHING = "enable_prefix_caching"  # vLLM's engine argument


def prefix_cache_note(repeats: Sequence[Repeat]) -> dict[str, Any]:
    """Whether the measured repeats hit vLLM's prefix cache (the manifest's
    ``bench.prefix_cache``): prompt tokens looked up and found cached, summed."""
    counted = [r.prefix_cache for r in repeats if r.prefix_cache is not None]
    if len(counted) != len(repeats) or not repeats:
        return {"hit": None, "why": "the backend does not report vLLM's prefix-cache counters"}
    queries = sum(c["queries"] for c in counted)
    hits = sum(c["hits"] for c in counted)
    return {"hit": hits > 0, "queried_tokens": queries, "hit_tokens": hits}


def _jobs(plan: Plan, case: Case, tag: str, cap: int | None = None) -> list[PromptJob]:
    limits = [c for c in (plan.sampling.max_tokens, cap) if c is not None]
    jobs = jobs_from_prompts(list(case.prompts), chat=plan.chat, cap=min(limits, default=None))
    return [replace(j, request_id=f"{case.slug}.{tag}.{j.prompt_id}") for j in jobs]


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def case_row(
    case: Case,
    plan: Plan,
    repeats: Sequence[Repeat],
    run_dir: str,
    signature: str,
    dtype: str | None,
) -> Row:
    """The results row of a measured case (speedups are filled in by :func:`with_speedups`)."""
    tok_s = [r.tokens / r.wall_s for r in repeats]
    chars_s = [r.chars / r.wall_s for r in repeats]
    bytes_s = [r.bytes / r.wall_s for r in repeats]
    total = sum((r.counters for r in repeats), SpecCounters())
    baseline = case.method.method == BASELINE
    per_pos = (
        [a / total.num_drafts for a in total.accepted_per_position] if total.num_drafts else []
    )
    mean = statistics.fmean(tok_s)
    return {
        "case_id": case.case_id,
        "model": case.model.name,
        "model_path": case.model.path,
        "dtype": (dtype or case.model.dtype).removeprefix("torch."),
        "quantization": case.model.quantization,
        "method_label": case.method.name,
        "method": case.method.method,
        "k": 0 if baseline else case.k,
        "draft_model": case.method.draft_model,
        "corpus": case.corpus.name,
        "length": case.length,
        "lang": case.lang,
        "prompts": len(case.prompts),
        "warmup": plan.warmup,
        "repeats": len(repeats),
        "concurrency": plan.concurrency,
        "output_tokens": int(statistics.median(r.tokens for r in repeats)),
        "output_chars": int(statistics.median(r.chars for r in repeats)),
        "output_bytes": int(statistics.median(r.bytes for r in repeats)),
        "tok_s": statistics.median(tok_s),
        "tok_s_min": min(tok_s),
        "tok_s_max": max(tok_s),
        "tok_s_cv": statistics.pstdev(tok_s) / mean if mean else None,
        "chars_s": statistics.median(chars_s),
        "chars_s_min": min(chars_s),
        "chars_s_max": max(chars_s),
        "bytes_s": statistics.median(bytes_s),
        "bytes_s_min": min(bytes_s),
        "bytes_s_max": max(bytes_s),
        "ttft_s": _median([t for r in repeats for t in r.ttft]),
        "wall_s": statistics.median(r.wall_s for r in repeats),
        "num_drafts": total.num_drafts,
        "num_draft_tokens": total.num_draft_tokens,
        "num_accepted_tokens": total.num_accepted_tokens,
        "acceptance_rate": None if baseline else total.acceptance_rate,
        "mean_acceptance_length": None if baseline else total.mean_acceptance_length,
        "acceptance_per_position": None if baseline else per_pos,
        "run_dir": run_dir,
        "signature": signature,
    }


def with_speedups(rows: Sequence[Row]) -> list[Row]:
    """Rows with speedup over the baseline of the same model, corpus, length and language."""

    def key(row: Row) -> tuple[Any, ...]:
        return (row["model"], row["corpus"], row["length"], row["lang"])

    baselines = {key(r): r for r in rows if r["method"] == BASELINE}
    out = []
    for row in rows:
        base = baselines.get(key(row))
        row = dict(row)
        row["baseline_case_id"] = base["case_id"] if base is not None else None
        for col in ("tok_s", "chars_s"):
            ok = base is not None and base[col] and row[col] is not None
            row[f"speedup_{col}"] = row[col] / base[col] if ok and base is not None else None
        out.append(row)
    return out


class _Bench:
    """State of one bench invocation: output layout, finished rows, progress."""

    def __init__(self, config: BenchConfig, plan: Plan, progress: Progress) -> None:
        self.config = config
        self.plan = plan
        self.progress = progress
        self.out = config.out
        self.rows: dict[str, Row] = {}
        # case id -> whether its measured repeats hit vLLM's prefix cache (this session)
        self.prefix_cache: dict[str, dict[str, Any]] = {}
        self.vllm_version = "unknown"
        self.created_at = now_iso()

    # -- layout and resumption ------------------------------------------------------
    def prepare(self, vllm_version: str) -> int:
        """Create or reopen the output directory; returns how many cases are already done."""
        out = self.out
        info_path = out / BENCH_JSON
        if info_path.exists() and not self.config.restart:
            info = json.loads(info_path.read_text(encoding="utf-8"))
            check_readable(info, BENCH, info_path)
            self.created_at = info.get("created_at", self.created_at)
            if info.get("plan_sha256") != self.plan.sha256:
                raise TokenlensError(
                    f"{out} holds a bench of another plan (or an edited one): "
                    "use a new --out, or --restart to discard it"
                )
        elif out.exists() and any(out.iterdir()):
            if not self.config.restart and not info_path.exists():
                raise TokenlensError(f"{out} exists and is not a bench directory: use a new --out")
            for child in (
                out / RUNS,
                out / CAPTURE,
                out / RESULTS_CSV,
                out / RESULTS_MD,
                info_path,
            ):
                if child.is_dir():
                    shutil.rmtree(child)
                elif child.exists():
                    child.unlink()
        self.vllm_version = vllm_version
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.plan.path, out / "plan.toml")
        for case in self.plan.cases:
            row_path = out / RUNS / case.slug / CASE_JSON
            if row_path.exists():
                self.rows[case.case_id] = json.loads(row_path.read_text(encoding="utf-8"))
        self.write_info(status="partial")
        return len(self.rows)

    def write_info(self, status: str) -> None:
        plan, vllm_version = self.plan, self.vllm_version
        fields = {
            "tokenlens": __version__,
            "vllm": vllm_version,
            "plan": plan.name,
            "plan_sha": plan.sha256[:12],
            "repeats": plan.repeats,
            "warmup": plan.warmup,
            "conc": plan.concurrency,
            "server": "yes" if self.config.server else "no",
        }
        write_json_atomic(
            self.out / BENCH_JSON,
            {
                **stamp(BENCH),
                "signature": make_signature(fields),
                "status": status,
                "tokenlens_version": __version__,
                "vllm_version": vllm_version,
                "plan": {"name": plan.name, "description": plan.description, **plan.raw},
                "plan_path": str(plan.path),
                "plan_sha256": plan.sha256,
                "created_at": self.created_at,
                "updated_at": now_iso(),
                "argv": list(self.config.argv),
                "server": self.config.server,
                "machine": {"platform": platform.platform(), "processor": platform.processor()},
                "prefix_cache": "off for timing (enable_prefix_caching=false) unless a "
                "[[model]].engine table turns it on; each case's manifest says whether its "
                "repeats hit it (bench.prefix_cache)",
                "cases_total": len(plan.cases),
                "cases_done": len(self.rows),
            },
        )

    def pending(self) -> list[Case]:
        return [c for c in self.plan.cases if c.case_id not in self.rows]

    def finish_case(self, case: Case, row: Row) -> None:
        write_json_atomic(self.out / RUNS / case.slug / CASE_JSON, row)
        self.rows[case.case_id] = row
        self.write_info(status="partial")
        self.write_tables()

    def ordered_rows(self) -> list[Row]:
        return with_speedups(
            [self.rows[c.case_id] for c in self.plan.cases if c.case_id in self.rows]
        )

    def write_tables(self) -> None:
        from tokenlens.bench.results_md import results_markdown

        rows = self.ordered_rows()
        write_results(self.out / RESULTS_CSV, rows)
        info = json.loads((self.out / BENCH_JSON).read_text(encoding="utf-8"))
        (self.out / RESULTS_MD).write_text(results_markdown(rows, info), encoding="utf-8")

    # -- one case -------------------------------------------------------------------
    def measure(
        self,
        case: Case,
        generate: Callable[[list[PromptJob]], GenerationResult],
        counters: Callable[[], SpecCounters],
    ) -> tuple[list[Repeat], GenerationResult]:
        """Warm-ups, then repeats; returns them and the first repeat's full result."""
        for w in range(self.plan.warmup):
            generate(_jobs(self.plan, case, f"w{w}", self.plan.warmup_tokens))
        before = counters()
        results = [generate(_jobs(self.plan, case, f"r{r}")) for r in range(self.plan.repeats)]
        total = counters() - before
        repeats = [
            Repeat.of(res.requests, res.wall_seconds, res.counters, res.info) for res in results
        ]
        summed = sum((r.counters for r in repeats), SpecCounters())
        if summed != total:
            raise TokenlensError(
                f"case {case.case_id}: per-repeat counters {summed} do not add up to the "
                f"case's counter difference {total}: is another client using the engine?"
            )
        return repeats, results[0]

    def run_case(self, case: Case, backend: Backend, capture_dir: Path | None) -> Row:
        """Measure ``case`` on ``backend``, write its run directory, return its row."""
        plan, config = self.plan, self.config
        sampling = sampling_config(plan)
        repeats, first = self.measure(
            case,
            lambda jobs: backend.generate(jobs, sampling, plan.concurrency),
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
        return self.write_run(
            case, manifest, first, capture_dir, repeats, backend.info.get("dtype")
        )

    def write_run(
        self,
        case: Case,
        manifest: dict[str, Any],
        first: GenerationResult,
        capture_dir: Path | None,
        repeats: Sequence[Repeat],
        dtype: str | None,
    ) -> Row:
        """The case's run directory (its first measured repeat) and its results row."""
        run_dir = self.out / RUNS / case.slug
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
            "plan": self.plan.name,
            "plan_sha256": self.plan.sha256,
            "repeat_recorded": 0,
            "repeats": [
                {
                    "wall_seconds": r.wall_s,
                    "output_tokens": r.tokens,
                    "output_chars": r.chars,
                    "output_bytes": r.bytes,
                    "counters": r.counters.to_json(),
                    "per_request_counters": (
                        r.reported.to_json() if r.reported is not None else None
                    ),
                    "prefix_cache": r.prefix_cache,
                }
                for r in repeats
            ],
            "prefix_cache": prefix_cache_note(repeats),
        }
        self.prefix_cache[case.case_id] = manifest["bench"]["prefix_cache"]
        writer = RunWriter(run_dir, manifest, overwrite=True)
        langs = {p.id: p.lang for p in case.prompts}
        pairs = {p.id: p.pair for p in case.prompts}
        prefix = f"{case.slug}.r0."
        # The engine reports our per-repeat request ids; the run directory uses prompt ids.
        requests = [replace(r, prompt_id=r.prompt_id.removeprefix(prefix)) for r in first.requests]
        id_map = None
        if capture_dir is not None:
            if self.config.server is not None:  # the client's ids are the map's keys
                id_map = {f"{prefix}{p.id}": p.id for p in case.prompts}
            else:
                id_map = {
                    internal: rid[len(prefix) :]
                    for internal, rid in load_id_map(capture_dir).items()
                    if rid.startswith(prefix)
                }
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
        )
        if done.problems:
            raise TokenlensError(
                f"case {case.case_id}: events do not match vLLM's counters "
                f"({'; '.join(done.problems)}); run kept at {run_dir}"
            )
        rel = str(run_dir.relative_to(self.out))
        return case_row(case, self.plan, repeats, rel, writer.manifest["signature"], dtype)


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
    server = _server(config, plan, progress) if config.server is not None else None
    if server is None:  # a vLLM the hook cannot trace: one line before anything is written
        precheck_capture(trace_config(plan, plan.cases[0], config.out, config.cache), progress)
    bench = _Bench(config, plan, progress)
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
                row = bench.run_case(case, backend, capture_dir)
                bench.finish_case(case, row)
                progress.note(
                    f"done {case.case_id}: {row['tok_s']:.2f} tok/s{_cached(bench, case)}"
                )
    return _finish(bench, resumed)


def _cached(bench: _Bench, case: Case) -> str:
    """`` (its repeats hit the prefix cache: ...)`` when they did, else nothing."""
    note = bench.prefix_cache.get(case.case_id) or {}
    if not note.get("hit"):
        return ""
    return (
        f" (its repeats hit vLLM's prefix cache: {note['hit_tokens']} of "
        f"{note['queried_tokens']} prompt tokens cached; timings include cached prefills)"
    )


def _engine(bench: _Bench, first: Case, start: StartBackend) -> tuple[Backend, Path]:
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


def _finish(bench: _Bench, resumed: int) -> BenchResult:
    bench.write_info(status="complete")
    bench.write_tables()
    return BenchResult(
        out=bench.out,
        results_csv=bench.out / RESULTS_CSV,
        results_md=bench.out / RESULTS_MD,
        rows=bench.ordered_rows(),
        resumed=resumed,
    )
