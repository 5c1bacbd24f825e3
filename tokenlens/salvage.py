"""Salvage: what a trace that died left behind, made into an analysable partial run.

The plugin's step files and the worker's ``finished-<pid>.jsonl`` records outlive the
engine. :func:`salvage` rebuilds requests and events from every capture directory of a
run (``capture/``, then ``capture/resume-<n>/``); :func:`salvage_partial` writes them
into the run directory, marked ``partial``; ``trace --resume`` keeps what finished
(:meth:`Salvage.finished_only`) and generates the rest.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tokenlens.capture.events import EVENTS_WRITE_SCHEMA, build_capture, read_jsonl
from tokenlens.capture.reconcile import counters_from_events
from tokenlens.engine.results import GeneratedRequest, SpecCounters, TokenLogprobs
from tokenlens.engine.worker import FINISHED_PREFIX
from tokenlens.errors import TokenlensError
from tokenlens.rundir import (
    CAPTURE,
    MANIFEST,
    METRICS,
    REQUESTS,
    RESUME_PREFIX,
    now_iso,
    requests_table,
    write_events,
    write_json_atomic,
)
from tokenlens.text.detokenize import decode_output


def implied_finish_reason(
    ids: Sequence[int], max_tokens: int | None, vocab: Any, ignore_eos: bool = False
) -> str | None:
    """The finish reason the step files imply for a request's output (None: unfinished).

    vLLM's own order (``check_stop``): a stop token last means ``stop`` (the stop
    tokens are special tokens of the vocabulary), else reaching ``max_tokens`` means
    ``length``. A request that ended neither way was cut off by the crash.
    """
    if not ids:
        return None
    last = int(ids[-1])
    if not ignore_eos and last >= 0 and bool(vocab.is_special([last])[0]):
        return "stop"
    if max_tokens is not None and len(ids) >= max_tokens:
        return "length"
    return None


def read_finished(directory: Path) -> dict[str, GeneratedRequest]:
    """Requests the worker recorded as finished (``finished-<pid>.jsonl``), by request id."""
    out: dict[str, GeneratedRequest] = {}
    for path in sorted(directory.glob(f"{FINISHED_PREFIX}*.jsonl")):
        for rec in read_jsonl(path):
            lp = rec.get("logprobs")
            rec["output_token_ids"] = tuple(rec["output_token_ids"])
            rec["logprobs"] = (
                tuple(
                    TokenLogprobs(
                        logprob=t["logprob"],
                        rank=t["rank"],
                        top_ids=tuple(t["top_ids"]),
                        top_logprobs=tuple(t["top_logprobs"]),
                    )
                    for t in lp
                )
                if lp is not None
                else None
            )
            known = {f.name for f in dataclasses.fields(GeneratedRequest)}
            req = GeneratedRequest(**{k: v for k, v in rec.items() if k in known})
            out.setdefault(req.prompt_id, req)
    return out


def attempt_dirs(run: Path) -> list[Path]:
    """Capture directories of a run, oldest first: ``capture/``, then one per resume."""
    root = run / CAPTURE
    resumed = [p for p in root.glob(f"{RESUME_PREFIX}*") if p.is_dir()]
    return [root, *sorted(resumed, key=lambda p: int(p.name.removeprefix(RESUME_PREFIX)))]


@dataclass
class Salvage:
    """What the capture directories of a run hold, one source per request.

    A request the worker recorded as finished comes from that record (vLLM's own
    text, logprobs and finish reason) with the events of the attempt it finished in;
    any other request from the latest attempt's step files, with the finish reason
    they imply. ``finished`` names the requests vLLM finished.
    """

    requests: list[GeneratedRequest]
    events: pa.Table
    finished: set[str]
    gaps: list[str]
    counters: SpecCounters  # derived from ``events``: vLLM's died with the engine
    # Requests vLLM finished whose step files stop short of their output (the events
    # of their last steps were lost): not in ``finished``, so a resume generates them.
    cut: list[str] = dataclasses.field(default_factory=list)

    def finished_only(self) -> Salvage:
        """The requests vLLM finished and their events (what ``trace --resume`` keeps)."""
        finished = pa.array(sorted(self.finished), pa.string())
        keep = pc.is_in(self.events.column("request_id"), finished)
        events = self.events.filter(keep)
        requests = [r for r in self.requests if r.prompt_id in self.finished]
        counters = counters_from_events(events)
        return Salvage(requests, events, self.finished, self.gaps, counters, self.cut)

    def unfinished(self) -> list[str]:
        """The recorded requests cut off (no finish reason), or whose events are cut."""
        cut = set(self.cut)
        return sorted(
            r.prompt_id for r in self.requests if r.finish_reason is None or r.prompt_id in cut
        )


def salvage(
    run: Path, tokenizer: str, max_tokens: dict[str, int | None], ignore_eos: bool = False
) -> Salvage:
    """Rebuild requests and events from every capture directory of ``run``.

    ``max_tokens`` (request id -> the length it was sent with) lets the step files
    imply ``length`` for requests the worker did not record as finished.
    """
    from tokenlens.text import load_tokenizer

    try:
        vocab: Any = load_tokenizer(tokenizer)
    except TokenlensError:
        vocab = None
    source: dict[str, tuple[int, GeneratedRequest]] = {}
    recorded: set[str] = set()
    cut: set[str] = set()  # finished by vLLM, but its step file stops short of its output
    tables: list[pa.Table] = []
    gaps: list[str] = []
    for attempt, directory in enumerate(attempt_dirs(run)):
        capture = build_capture(directory)
        gaps += capture.gaps
        tables.append(capture.table())
        for rid, req in read_finished(directory).items():
            if rid in recorded:
                continue
            steps = capture.outputs.get(rid)
            if list(steps or ()) != list(req.output_token_ids):
                # The step file stops short of vLLM's output (a SIGKILL cuts its last
                # lines): the request is kept for what it holds but is not finished, so
                # a resume generates it again (a later attempt may hold it whole).
                gaps.append(f"{rid}: vLLM's output differs from the step files")
                cut.add(rid)
                source[rid] = (attempt, req)
                continue
            recorded.add(rid)
            cut.discard(rid)
            source[rid] = (attempt, req)
        for rid, ids in capture.outputs.items():
            if rid in recorded or (rid in cut and source[rid][0] == attempt):
                continue
            text = decode_output(vocab, ids) if vocab is not None else ""
            reason = (
                implied_finish_reason(ids, max_tokens.get(rid), vocab, ignore_eos)
                if vocab is not None
                else None
            )
            source[rid] = (
                attempt,
                GeneratedRequest(
                    prompt_id=rid,
                    vllm_request_id="",
                    prompt_token_count=0,
                    output_token_ids=tuple(ids),
                    output_text=text,
                    finish_reason=reason,
                ),
            )
    parts = []
    for attempt, table in enumerate(tables):
        mine = [rid for rid, (a, _) in source.items() if a == attempt]
        keep = pc.is_in(table.column("request_id"), pa.array(mine, pa.string()))
        parts.append(table.filter(keep))
    events = pa.concat_tables(parts) if parts else EVENTS_WRITE_SCHEMA.empty_table()
    requests = [req for _, (_, req) in sorted(source.items())]
    return Salvage(requests, events, recorded, gaps, counters_from_events(events), sorted(cut))


def salvage_partial(
    run: Path,
    tokenizer: str,
    langs: dict[str, str],
    pairs: dict[str, str | None],
    max_tokens: dict[str, int | None] | None = None,
    ignore_eos: bool = False,
    facts: dict[str, Any] | None = None,
) -> Salvage:
    """Turn what the plugin and worker flushed before a crash into an analysable partial run.

    ``facts``: what the engine said about itself (dtype, engine, ...), recorded in the
    manifest where it holds none yet, so that a resume keeps them. A request vLLM
    finished whose step files stop short of its output is listed in
    ``salvage.events_cut`` and ``salvage.unfinished``, and generated again by a resume.

    Finished requests come from the worker's records, the others are rebuilt from the
    recorded steps (every appended token is in them) and decoded with the run's
    tokenizer, with the finish reason the steps imply; ``metrics.json`` then holds
    counts derived from the events, marked as such, because vLLM's own counters died
    with the engine. ``tokenlens trace --resume`` completes such a run.
    """
    found = salvage(run, tokenizer, max_tokens or {}, ignore_eos)
    write_events(run, found.events)
    pq.write_table(requests_table(found.requests, langs, pairs), run / REQUESTS)
    metrics = {**found.counters.to_json(), "source": "events (engine died)"}
    write_json_atomic(run / METRICS, metrics)
    manifest = json.loads((run / MANIFEST).read_text(encoding="utf-8"))
    manifest.update(
        status="partial",
        salvaged_at=now_iso(),
        capture_gaps=found.gaps,
        salvage={
            "requests": len(found.requests),
            "finished": len(found.finished),
            "unfinished": found.unfinished(),
            "events_cut": found.cut,
        },
    )
    for key, value in (facts or {}).items():  # the engine's own facts, unless recorded
        if value is not None:
            manifest.setdefault(key, value)
    write_json_atomic(run / MANIFEST, manifest)
    return found
