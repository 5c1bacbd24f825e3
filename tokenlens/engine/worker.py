"""The engine worker: a subprocess that owns one vLLM ``LLM`` and serves requests.

Started by :class:`tokenlens.engine.runner.Engine` as ``python -m
tokenlens.engine.worker ADDRESS PARENT_PID``; the authkey arrives on stdin. The worker
leads its own process group (vLLM's engine processes included) and kills that group
when its parent dies (:func:`die_with_parent`). Messages are tuples over a
``multiprocessing.connection`` socket:

- parent -> worker: ``("start", EngineConfig)``, ``("generate", [PromptJob],
  SamplingConfig, concurrency)``, ``("counters",)``, ``("call", operation, args)``,
  ``("close",)``
- worker -> parent: ``("ready", info)``, ``("progress", n)``, ``("result", value)``,
  ``("error", one_line, traceback)``

All vLLM contact of the in-process path is here or in an operation of
:data:`tokenlens.engine.passes.OPERATIONS` that ``call`` runs by name; the worker never
imports a module by a name it was sent.

Why one file over 450 lines: it is everything that runs in the engine subprocess and
all of the in-process path's vLLM contact (building the ``LLM``, rendering prompts,
reading outputs, logprobs and counters, the request loop): a vLLM upgrade is checked
against this one file, and the subprocess imports nothing else of tokenlens beyond
plain data modules.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import asdict
from multiprocessing.connection import Client, Connection
from typing import Any

from tokenlens.engine.config import TRACE_DIR_ENV, EngineConfig, PromptJob, SamplingConfig
from tokenlens.engine.facts import engine_facts, extension_kwargs
from tokenlens.engine.results import (
    ACCEPTED_PER_POS,
    NUM_ACCEPTED,
    NUM_DRAFT_TOKENS,
    NUM_DRAFTS,
    GeneratedRequest,
    GenerationResult,
    SpecCounters,
    TokenLogprobs,
)

GiB = 1 << 30
PREEMPTIONS = "vllm:num_preemptions"
# vLLM's prefix-cache counters (prompt tokens looked up / found cached), per batch in
# ``GenerationResult.info``: bench says whether its repeats hit the cache.
PREFIX_QUERIES = "vllm:prefix_cache_queries"
PREFIX_HITS = "vllm:prefix_cache_hits"
CPU_KV_CACHE_BYTES = 2 * GiB


def cpu_thread_env(cores: int | None = None, workers: int = 1) -> dict[str, str]:
    """OpenMP binding env for the CPU build: all ``cores`` (default: every CPU), none
    reserved, split into one ``|``-separated span per worker (docs/development.md)."""
    n = cores or os.cpu_count() or 1
    per = max(n // max(workers, 1), 1)
    spans = [((w * per) % n, min((w * per) % n + per, n) - 1) for w in range(max(workers, 1))]
    bind = "|".join(f"{a}-{b}" if b > a else str(a) for a, b in spans)
    return {"VLLM_CPU_OMP_THREADS_BIND": bind, "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}


def _workers(config: EngineConfig) -> int:
    """Model workers per engine the engine options ask for (tensor x pipeline parallel)."""
    sizes = [config.extra.get(k, 1) for k in ("tensor_parallel_size", "pipeline_parallel_size")]
    return sizes[0] * sizes[1] if all(isinstance(s, int) for s in sizes) else 1


def _apply_env(config: EngineConfig) -> None:
    for key, value in cpu_thread_env(workers=_workers(config)).items():
        os.environ.setdefault(key, value)
    os.environ.update(config.env)
    if config.trace_dir is not None:
        os.environ[TRACE_DIR_ENV] = config.trace_dir


def build_llm(config: EngineConfig) -> Any:
    """Construct ``vllm.LLM`` with platform defaults filled in."""
    from vllm import LLM
    from vllm.platforms import current_platform

    kwargs: dict[str, Any] = {
        "model": config.model,
        "tokenizer": config.tokenizer or config.model,
        "dtype": config.dtype,
        "max_model_len": config.max_model_len,
        "seed": config.seed,
        "load_format": config.load_format,
        "disable_log_stats": False,  # the spec-decode counters live in the stat loggers
    }
    is_cpu = current_platform.is_cpu()
    enforce_eager = config.enforce_eager if config.enforce_eager is not None else is_cpu
    kwargs["enforce_eager"] = enforce_eager
    if config.kv_cache_memory_bytes is not None:
        kwargs["kv_cache_memory_bytes"] = config.kv_cache_memory_bytes
    elif is_cpu:
        kwargs["kv_cache_memory_bytes"] = CPU_KV_CACHE_BYTES
    if config.gpu_memory_utilization is not None:
        kwargs["gpu_memory_utilization"] = config.gpu_memory_utilization
    if config.max_num_seqs is not None:
        kwargs["max_num_seqs"] = config.max_num_seqs
    if config.speculative is not None:
        kwargs["speculative_config"] = config.speculative.to_vllm()
        kwargs.update(per_request_metrics_kwargs())
    kwargs.update(extension_kwargs(config.extra))  # the workers report their own facts
    kwargs.update(config.extra)
    return LLM(**kwargs)


def per_request_metrics_kwargs() -> dict[str, Any]:
    """``LLM`` kwargs asking for per-request spec-decode metrics with per-step counts
    (``detailed``); ``{}`` on a vLLM without the argument (before 0.32)."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    names = {f.name for f in dataclasses.fields(EngineArgs)}
    if "per_request_spec_decode_metrics" not in names:
        return {}
    return {"per_request_spec_decode_metrics": "detailed"}


def _spec_decode_metrics(seq: Any) -> dict[str, Any] | None:
    """A sequence's per-request spec-decode metrics as vLLM's response reports them."""
    metrics = getattr(seq, "spec_decode_metrics", None)
    if metrics is None or not hasattr(metrics, "to_dict"):
        return None
    out: dict[str, Any] = metrics.to_dict()
    return out


def read_counters(llm: Any) -> SpecCounters:
    """vLLM's spec-decode counters, summed over label sets (engines)."""
    total = SpecCounters()
    for metric in llm.get_metrics():
        if metric.name == ACCEPTED_PER_POS:
            total += SpecCounters.from_metric(metric.name, metric.values)
        elif metric.name in (NUM_DRAFTS, NUM_DRAFT_TOKENS, NUM_ACCEPTED):
            total += SpecCounters.from_metric(metric.name, metric.value)
    return total


def read_total(llm: Any, name: str) -> int:
    """A counter of vLLM's, summed over label sets (0 when absent)."""
    return sum(int(m.value) for m in llm.get_metrics() if m.name == name)


def render_prompt(tokenizer: Any, job: PromptJob, template_kwargs: dict[str, Any]) -> list[int]:
    """The prompt token ids the engine receives for ``job``: chat messages through the
    chat template with the generation prompt, raw text encoded as is. Public so that
    callers can measure prompts before starting the engine."""
    if job.messages is not None:
        text = tokenizer.apply_chat_template(
            job.messages, tokenize=False, add_generation_prompt=True, **template_kwargs
        )
    else:
        text = job.text or ""
    return list(tokenizer.encode(text, add_special_tokens=False))


def _render(llm: Any, job: PromptJob, template_kwargs: dict[str, Any]) -> dict[str, Any]:
    return {"prompt_token_ids": render_prompt(llm.get_tokenizer(), job, template_kwargs)}


def _logprobs(seq: Any) -> tuple[TokenLogprobs, ...] | None:
    if seq.logprobs is None:
        return None
    out = []
    for token_id, entry in zip(seq.token_ids, seq.logprobs, strict=True):
        own = entry[token_id]
        ranked = sorted(entry.items(), key=lambda kv: kv[1].rank)
        top = [(tid, lp.logprob) for tid, lp in ranked if tid != token_id or lp.rank is not None]
        out.append(
            TokenLogprobs(
                logprob=float(own.logprob),
                rank=int(own.rank),
                top_ids=tuple(int(t) for t, _ in top),
                top_logprobs=tuple(float(v) for _, v in top),
            )
        )
    return tuple(out)


def _ids(ids: Any) -> tuple[int, ...] | None:
    return None if ids is None else tuple(int(t) for t in ids)


def _convert(job: PromptJob, output: Any) -> list[GeneratedRequest]:
    stats = getattr(output, "metrics", None)
    latency = getattr(stats, "first_token_latency", None) if stats is not None else None
    return [
        GeneratedRequest(
            prompt_id=job.rid if len(output.outputs) == 1 else f"{job.rid}#{seq.index}",
            vllm_request_id=str(output.request_id),
            prompt_token_count=len(output.prompt_token_ids or ()),
            output_token_ids=tuple(int(t) for t in seq.token_ids),
            output_text=seq.text,
            finish_reason=seq.finish_reason,
            logprobs=_logprobs(seq),
            first_token_latency=float(latency) if latency else None,
            spec_decode=_spec_decode_metrics(seq),
            prompt_token_ids=_ids(output.prompt_token_ids),
        )
        for seq in output.outputs
    ]


class _Submissions:
    """Appends ``submitted-<pid>.jsonl`` beside the step files: engine request id -> run
    request id and prompt id, one line per submission; nothing when ``trace_dir`` is None."""

    def __init__(self, trace_dir: str | None) -> None:
        self.path = (
            None if trace_dir is None else os.path.join(trace_dir, f"submitted-{os.getpid()}.jsonl")
        )

    def add(self, internal: str, job: PromptJob) -> None:
        if self.path is None:
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        line = {"internal": internal, "request_id": job.rid, "prompt_id": job.prompt_id}
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")


FINISHED_PREFIX = "finished-"
"""``finished-<pid>.jsonl`` beside the step files: one finished request per line."""


class _Finished:
    """Appends each finished request (a :class:`GeneratedRequest`) to
    ``finished-<pid>.jsonl`` the moment it finishes, flushed; salvage and ``trace
    --resume`` read it. Nothing when ``trace_dir`` is None."""

    def __init__(self, trace_dir: str | None) -> None:
        self.path = (
            None
            if trace_dir is None
            else os.path.join(trace_dir, f"{FINISHED_PREFIX}{os.getpid()}.jsonl")
        )

    def add(self, requests: list[GeneratedRequest]) -> None:
        if self.path is None:
            return
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            for req in requests:
                fh.write(json.dumps(asdict(req), ensure_ascii=False) + "\n")
            fh.flush()


def _run(
    llm: Any,
    jobs: list[PromptJob],
    prompts: list[Any],
    params: list[Any],
    concurrency: int,
    log: _Submissions,
    conn: Connection | None,
    done: _Finished | None = None,
) -> list[Any]:
    """Keep ``concurrency`` requests in flight (our ids), stepping until all finish."""
    engine = llm.llm_engine
    by_rid = {job.rid: job for job in jobs}
    pending = list(zip(jobs, prompts, params, strict=True))
    pending.reverse()
    in_flight = 0
    finished: dict[str, Any] = {}
    while pending or engine.has_unfinished_requests():
        while pending and in_flight < concurrency:
            job, prompt, param = pending.pop()
            log.add(engine.add_request(job.rid, prompt, param), job)
            in_flight += 1
        for output in engine.step():
            if output.finished:
                finished[output.request_id] = output
                in_flight -= 1
                if done is not None:
                    done.add(_convert(by_rid[output.request_id], output))
                if conn is not None:
                    conn.send(("progress", 1))
    return [finished[job.rid] for job in jobs]


def generate(
    llm: Any,
    config: EngineConfig,
    jobs: list[PromptJob],
    sampling: SamplingConfig,
    concurrency: int,
    conn: Connection | None = None,
) -> GenerationResult:
    """Run ``jobs`` ``concurrency`` at a time; time the generate calls only."""
    import vllm
    from vllm import SamplingParams

    if len({job.rid for job in jobs}) != len(jobs):
        raise ValueError("request ids must be unique within one generate call")
    before = read_counters(llm)
    totals = (PREEMPTIONS, PREFIX_QUERIES, PREFIX_HITS)
    totals_before = [read_total(llm, name) for name in totals]
    prompts = [_render(llm, job, config.chat_template_kwargs) for job in jobs]
    params = [SamplingParams(**sampling.to_vllm(job.max_tokens)) for job in jobs]
    log = _Submissions(config.trace_dir)
    started_at = time.time()  # wall clock: the step timer's lines carry the same clock
    t0 = time.perf_counter()
    done = _Finished(config.trace_dir)
    outputs = _run(llm, jobs, prompts, params, max(1, concurrency), log, conn, done)
    wall = time.perf_counter() - t0
    ended_at = time.time()
    requests = [req for job, out in zip(jobs, outputs, strict=True) for req in _convert(job, out)]
    return GenerationResult(
        requests=tuple(requests),
        wall_seconds=wall,
        counters=read_counters(llm) - before,
        vllm_version=vllm.__version__,
        info={
            **{
                key: read_total(llm, name) - before_value
                for key, name, before_value in zip(
                    ("num_preemptions", "prefix_cache_queries", "prefix_cache_hits"),
                    totals,
                    totals_before,
                    strict=True,
                )
            },
            "started_at": started_at,
            "ended_at": ended_at,
        },
    )


def call(llm: Any, operation: str, args: tuple[Any, ...], conn: Connection) -> Any:
    """Run the engine operation ``operation(llm, *args, progress=...)`` next to the engine."""
    from tokenlens.engine.passes import OPERATIONS

    if operation not in OPERATIONS:
        raise ValueError(f"the engine has no operation {operation!r} ({', '.join(OPERATIONS)})")
    return OPERATIONS[operation](llm, *args, progress=lambda n: conn.send(("progress", n)))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:500]


def serve(conn: Connection) -> None:
    """Handle messages until ``close`` or the parent goes away."""
    kind, config = conn.recv()
    assert kind == "start"
    _apply_env(config)
    try:
        llm = build_llm(config)
        import vllm

        model_config = llm.llm_engine.model_config
        info = {
            "vllm_version": vllm.__version__,
            "dtype": str(model_config.dtype),
            "engine": engine_facts(llm),
        }
        conn.send(("ready", info))
    except BaseException as exc:  # report any start failure as one line, then exit
        conn.send(("error", _one_line(exc), traceback.format_exc()))
        return
    try:
        _loop(conn, llm, config)
    finally:
        llm.llm_engine.engine_core.shutdown()


def _loop(conn: Connection, llm: Any, config: EngineConfig) -> None:
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        try:
            if message[0] == "generate":
                _, jobs, sampling, concurrency = message
                conn.send(("result", generate(llm, config, jobs, sampling, concurrency, conn)))
            elif message[0] == "counters":
                conn.send(("result", read_counters(llm)))
            elif message[0] == "call":
                _, operation, args = message
                conn.send(("result", call(llm, operation, args, conn)))
            elif message[0] == "close":
                conn.send(("result", None))
                return
            else:
                conn.send(("error", f"unknown message {message[0]!r}", ""))
        except Exception as exc:
            conn.send(("error", _one_line(exc), traceback.format_exc()))


PR_SET_PDEATHSIG = 1  # linux/prctl.h
ORPHAN_SIGNAL = signal.SIGUSR2  # what the kernel sends us when the parent dies
WATCH_SECONDS = 1.0


def _end_group() -> None:
    """SIGKILL this worker's process group: the worker and every vLLM process it started."""
    if os.getpgrp() == os.getpid():  # we lead the group (Engine starts us in a new session)
        os.killpg(os.getpid(), signal.SIGKILL)
    import psutil  # not a group leader (started by hand): end our descendants, then us

    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            child.kill()
    os.kill(os.getpid(), signal.SIGKILL)


def die_with_parent(parent: int) -> None:
    """SIGKILL the worker's process group once ``parent`` is gone: the parent-death
    signal (Linux) plus a watchdog thread checking ``getppid()`` every second; both
    act only when really orphaned (docs/capture.md, "Crashes")."""

    def orphaned() -> bool:
        return os.getppid() != parent

    def on_signal(signum: int, frame: Any) -> None:
        if orphaned():
            _end_group()

    with contextlib.suppress(OSError, AttributeError, ValueError):
        signal.signal(ORPHAN_SIGNAL, on_signal)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(ORPHAN_SIGNAL), 0, 0, 0)
    if orphaned():  # the parent died before prctl took effect
        _end_group()

    def watch() -> None:
        while not orphaned():
            time.sleep(WATCH_SECONDS)
        _end_group()

    threading.Thread(target=watch, name="tokenlens-parent-watch", daemon=True).start()


def main() -> None:
    address = sys.argv[1]
    die_with_parent(int(sys.argv[2]) if len(sys.argv) > 2 else os.getppid())
    authkey = bytes.fromhex(sys.stdin.readline().strip())
    conn = Client(address, authkey=authkey)
    try:
        serve(conn)
    finally:
        conn.close()


if __name__ == "__main__":
    main()
