"""Run directories: the one file format between capture and analysis.

A run directory holds ``manifest.json`` (signature and provenance), ``requests.parquet``
(one row per request), ``metrics.json`` (vLLM's own counters) and, with capture,
``events.parquet`` (one row per draft token per verification step). See
docs/formats.md. Writers create the manifest first with status ``partial`` and flip it
to ``complete`` last, so an interrupted run is recognisable as such.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tokenlens.capture.events import EVENTS_OPTIONAL, EVENTS_SCHEMA, Capture
from tokenlens.capture.live import read_capture, read_live
from tokenlens.capture.reconcile import counters_from_events, reconcile
from tokenlens.capture.summary import empty_step_count, record_capture
from tokenlens.dirlock import DirLock
from tokenlens.engine.results import GeneratedRequest, SpecCounters
from tokenlens.errors import TokenlensError
from tokenlens.format_version import RUN, check_readable, stamp

MANIFEST = "manifest.json"
REQUESTS = "requests.parquet"
METRICS = "metrics.json"
EVENTS = "events.parquet"
CAPTURE = "capture"  # the plugin's step files (kept: they are the raw record)
RESUME_PREFIX = "resume-"  # capture/resume-<n>/: the step files of the n-th resume
STATUSES = ("complete", "partial")

MANIFEST_KEYS = (
    "signature",
    "status",
    "tokenlens_version",
    "vllm_version",
    "model",
    "tokenizer",
    "speculative",
    "sampling",
    "created_at",
    "argv",
)

REQUESTS_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("prompt_id", pa.string()),
        ("lang", pa.string()),
        ("pair", pa.string()),
        ("output_text", pa.string()),
        ("output_token_ids", pa.list_(pa.int64())),
        ("finish_reason", pa.string()),
        ("prompt_token_count", pa.int64()),
        ("vllm_request_id", pa.string()),
        ("first_token_latency", pa.float64()),
        # The target's confidence per emitted token (null lists without --logprobs).
        ("token_logprob", pa.list_(pa.float64())),
        ("token_rank", pa.list_(pa.int64())),
        ("top_ids", pa.list_(pa.list_(pa.int64()))),
        ("top_logprobs", pa.list_(pa.list_(pa.float64()))),
    ]
)
# Columns added after run directories were first written. Writers always write them;
# readers accept directories without them (filled with nulls), and the feature that
# needs one says in one line why it cannot run (replay needs ``prompt_token_ids``).
REQUESTS_OPTIONAL = pa.schema(
    [
        # The token ids vLLM prefilled (chat template applied).
        ("prompt_token_ids", pa.list_(pa.int64())),
    ]
)
REQUESTS_WRITE_SCHEMA = pa.schema([*REQUESTS_SCHEMA, *REQUESTS_OPTIONAL])


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON via a temporary file and rename, so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half file behind; the old one stays
        raise


def requests_table(
    requests: list[GeneratedRequest], langs: dict[str, str], pairs: dict[str, str | None]
) -> pa.Table:
    """``requests.parquet`` rows; ``request_id`` is the prompt id (plus ``#i`` for n > 1)."""
    rows: dict[str, list[Any]] = {name: [] for name in REQUESTS_WRITE_SCHEMA.names}
    for req in requests:
        base = req.prompt_id.split("#", 1)[0]
        lp = req.logprobs
        rows["request_id"].append(req.prompt_id)
        rows["prompt_id"].append(base)
        rows["lang"].append(langs.get(base))
        rows["pair"].append(pairs.get(base))
        rows["output_text"].append(req.output_text)
        rows["output_token_ids"].append(list(req.output_token_ids))
        rows["finish_reason"].append(req.finish_reason)
        rows["prompt_token_count"].append(req.prompt_token_count)
        rows["vllm_request_id"].append(req.vllm_request_id)
        rows["first_token_latency"].append(req.first_token_latency)
        rows["token_logprob"].append([t.logprob for t in lp] if lp else None)
        rows["token_rank"].append([t.rank for t in lp] if lp else None)
        rows["top_ids"].append([list(t.top_ids) for t in lp] if lp else None)
        rows["top_logprobs"].append([list(t.top_logprobs) for t in lp] if lp else None)
        ids = req.prompt_token_ids
        rows["prompt_token_ids"].append(list(ids) if ids is not None else None)
    return pa.table(rows, schema=REQUESTS_WRITE_SCHEMA)


def write_events(run: Path, events: pa.Table) -> None:
    pq.write_table(events, run / EVENTS)


def resume_command(path: Path, manifest: dict[str, Any]) -> str | None:
    """The exact command that completes the partial run at ``path`` (None: none does)."""
    resumable = isinstance(manifest.get("trace_config"), dict)  # replays inherit one
    if not resumable or "bench" in manifest:
        return None
    if manifest.get("replayed_from"):
        return None
    return f"tokenlens trace --resume {shlex.quote(str(path))}"


def continue_hint(path: Path, manifest: dict[str, Any]) -> str:
    """What to type to finish the partial run at ``path`` (the exact command where one exists)."""
    command = resume_command(path, manifest)
    if command is not None and manifest.get("server"):
        return f"continue it with: {command} (every prompt is sent to the server again)"
    if command is not None:
        return f"continue it with: {command}"
    if "bench" in manifest:
        return "run the same `tokenlens bench` command again (finished cases are kept)"
    if manifest.get("replayed_from"):
        return "replay it again (tokenlens replay ... --overwrite)"
    return "it was written by a tokenlens without --resume: trace it again with --overwrite"


def _manifest_or_empty(path: Path) -> dict[str, Any]:
    """The manifest at ``path`` for a message, or {} when it cannot be read."""
    try:
        data = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class RunWriter:
    """Creates a run directory: manifest (partial) first, data, then manifest complete.

    The directory is locked (:class:`DirLock`) from the first write until ``complete``
    (or :meth:`release`), so two writers never mix their files in one run.
    """

    def __init__(self, path: str | Path, manifest: dict[str, Any], overwrite: bool = False):
        self.path = Path(path)
        self._lock: DirLock | None = None
        self.check_free(self.path, overwrite)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TokenlensError(f"cannot create {self.path}: {exc.strerror or exc}") from None
        self._lock = DirLock(self.path)
        missing = [k for k in MANIFEST_KEYS if k not in manifest and k != "status"]
        if missing:
            self.release()
            raise ValueError(f"manifest lacks {missing}")
        try:
            for name in (REQUESTS, METRICS, EVENTS):
                (self.path / name).unlink(missing_ok=True)
            self.manifest = {**manifest, **stamp(RUN), "status": "partial"}
            write_json_atomic(self.path / MANIFEST, self.manifest)
        except OSError as exc:
            self.release()
            raise TokenlensError(f"cannot write the run directory {self.path}: {exc}") from None

    @staticmethod
    def check_free(path: Path, overwrite: bool) -> None:
        """Refuse, before any work, a path that is a file, in use, or already holds a run.

        A partial run is named as such with the command that continues it, since
        ``--overwrite`` would discard what it finished.
        """
        if path.exists() and not path.is_dir():
            raise TokenlensError(f"{path} is a file, not a run directory")
        if DirLock.held(path):
            DirLock(path)  # raises the one-line "another tokenlens is writing" error
        if (path / MANIFEST).exists() and not overwrite:
            manifest = _manifest_or_empty(path)
            command = resume_command(path, manifest)
            if manifest.get("status") == "partial" and command is not None:
                raise TokenlensError(
                    f"{path} already holds a run that did not finish (partial): continue it "
                    f"with: {command}, or give --overwrite to discard what it finished"
                )
            if manifest.get("status") == "partial":
                raise TokenlensError(
                    f"{path} already holds a run that did not finish (partial; "
                    f"{continue_hint(path, manifest)})"
                )
            raise TokenlensError(f"{path} already holds a run (use --overwrite to replace it)")

    @classmethod
    def reopen(cls, path: Path) -> RunWriter:
        """A writer over an existing run (``trace --resume``): its manifest is kept, locked."""
        writer = cls.__new__(cls)
        writer.path = path
        writer._lock = DirLock(path)
        writer.manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        check_readable(writer.manifest, RUN, path / MANIFEST)
        writer.manifest.update(stamp(RUN))  # every file is rewritten by this version
        return writer

    def release(self) -> None:
        """Let other writers in (done by :meth:`complete`; idempotent)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def write_requests(self, table: pa.Table) -> None:
        pq.write_table(table, self.path / REQUESTS)

    def write_metrics(self, counters: SpecCounters) -> None:
        write_json_atomic(self.path / METRICS, counters.to_json())

    def update(self, **fields: Any) -> None:
        self.manifest.update(fields)
        write_json_atomic(self.path / MANIFEST, self.manifest)

    def complete(self, **fields: Any) -> None:
        self.update(**fields, status="complete", finished_at=now_iso())
        self.release()


COUNTER_SOURCES = ("vllm", "derived")
DERIVED_NOTE = "derived from events.parquet: these are not vLLM's counters"


@dataclass(frozen=True)
class Finished:
    """What :func:`finalize` found: the reconciliation's differences (empty: exact) and,
    for a run with a capture directory, why its capture cannot be trusted (or None)."""

    problems: list[str]
    capture_problem: str | None = None


def finalize(
    writer: RunWriter,
    requests: pa.Table,
    events: pa.Table | None = None,
    counters: SpecCounters | None = None,
    *,
    counters_source: str = "vllm",
    capture: Path | None = None,
    id_map: dict[str, str] | None = None,
    keep: set[str] | None = None,
    reported: dict[str, dict[str, Any]] | None = None,
    extra_manifest: dict[str, Any] | None = None,
    live: bool = False,
) -> Finished:
    """Finish a run directory: requests, metrics, events, reconciliation, ``complete``.

    The one way a run is finished (trace, in-process or served; each bench case;
    replay), so every writer leaves the same files in the same order.
    ``counters_source="vllm"``: ``counters`` are vLLM's and the events are reconciled
    against them. ``"derived"`` (replayed runs, which have no engine): metrics.json
    holds counts computed from the events and says so, in its ``source`` field and in
    the manifest's ``counters_source``.

    The events are either given (``events``) or built from a plugin's ``capture``
    directory (step files; ``id_map`` and ``keep`` as in
    :func:`tokenlens.capture.events.build_capture`); a capture also records the
    manifest's ``capture`` and ``per_request_reconciliation`` (against ``reported``,
    vLLM's per-request figures). ``live``: an engine is still writing the capture (a
    server; a bench's engine), so it is read by :func:`tokenlens.capture.live.read_live`,
    which waits for the engine's writer. The caller decides how to fail on what it returns.
    """
    if counters_source not in COUNTER_SOURCES:
        raise ValueError(f"counters_source must be one of {COUNTER_SOURCES}")
    if events is not None and capture is not None:
        raise ValueError("give events or a capture directory, not both")
    writer.write_requests(requests)
    if counters_source == "derived":
        if events is None:
            raise ValueError("derived counters need events")
        counters = counters_from_events(events)
        write_json_atomic(writer.path / METRICS, {**counters.to_json(), "source": DERIVED_NOTE})
    else:
        if counters is None:
            raise ValueError("counters_source='vllm' needs vLLM's counters")
        writer.write_metrics(counters)
    recorded: Capture | None = None
    if capture is not None and live:
        recorded, events = read_live(capture, requests, counters, id_map=id_map, keep=keep)
    elif capture is not None:
        recorded, events = read_capture(capture, requests, id_map=id_map, keep=keep)
    problems: list[str] = []
    if events is not None:
        write_events(writer.path, events)
        empty = len(recorded.empty_steps) if recorded is not None else 0
        problems = reconcile(events, counters, empty)
    fields: dict[str, Any] = {
        "counters_source": counters_source,
        "reconciliation": {"exact": not problems, "differences": problems},
    }
    capture_problem = None
    if capture is not None and recorded is not None:
        summary, per_request, capture_problem = record_capture(
            capture, recorded, events, reported or {}, counters.num_drafts
        )
        fields.update(per_request_reconciliation=per_request, capture=summary)
    writer.complete(**(extra_manifest or {}), **fields)
    return Finished(problems, capture_problem)


def manifest_k(manifest: Mapping[str, Any]) -> int:
    """k, the draft tokens per step, from a manifest (0 for a baseline or when missing).

    The manifest keeps vLLM's ``speculative_config`` under vLLM's own names (the run
    directory's contract), so k is ``speculative.num_speculative_tokens`` there; inside
    tokenlens it is ``k``, and this is the one place that reads it.
    """
    spec = manifest.get("speculative")
    return int((spec.get("num_speculative_tokens") if isinstance(spec, Mapping) else 0) or 0)


@dataclass(frozen=True)
class Run:
    """A validated run directory."""

    path: Path
    manifest: dict[str, Any]
    requests: pa.Table
    metrics: SpecCounters
    events: pa.Table | None

    @property
    def complete(self) -> bool:
        return bool(self.manifest["status"] == "complete")

    @property
    def method(self) -> str:
        return str((self.manifest.get("speculative") or {}).get("method", "unknown"))

    @property
    def k(self) -> int:
        return manifest_k(self.manifest)

    @property
    def empty_steps(self) -> int:
        """Counted steps without event rows (all drafts grammar-invalidated): reconcile with it."""
        return empty_step_count(self.manifest)


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise TokenlensError(f"{path.parent}: not a run directory ({path.name} is missing)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise TokenlensError(f"{path}: malformed JSON ({exc})") from None
    except OSError as exc:
        raise TokenlensError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def _read_table(path: Path, schema: pa.Schema, optional: pa.Schema | None = None) -> pa.Table:
    """Read and type-check a table; ``optional`` columns are null-filled when absent."""
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise TokenlensError(f"{path}: unreadable parquet ({' '.join(str(exc).split())})") from None
    for field in optional or ():
        if field.name not in table.schema.names:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    for field in pa.schema([*schema, *(optional or ())]):
        if field.name not in table.schema.names:
            raise TokenlensError(f"{path}: missing column '{field.name}'")
        actual = table.schema.field(field.name).type
        if actual != field.type and not (pa.types.is_null(actual) and field.nullable):
            raise TokenlensError(
                f"{path}: column '{field.name}' has type {actual}, expected {field.type}"
            )
    return table


def read_run(path: str | Path) -> Run:
    """Read and validate a run directory; one-line errors name the bad part."""
    root = Path(path)
    if not root.is_dir():
        raise TokenlensError(f"run directory not found: {root}")
    manifest = _read_json(root / MANIFEST)
    if not isinstance(manifest, dict):
        raise TokenlensError(f"{root / MANIFEST}: expected a JSON object")
    check_readable(manifest, RUN, root)
    for key in MANIFEST_KEYS:
        if key not in manifest:
            raise TokenlensError(f"{root / MANIFEST}: missing key '{key}'")
    if manifest["status"] not in STATUSES:
        raise TokenlensError(f"{root / MANIFEST}: status must be one of {STATUSES}")
    absent = [name for name in (REQUESTS, METRICS) if not (root / name).is_file()]
    if absent and manifest["status"] == "partial":
        raise TokenlensError(
            f"{root} is a partial run whose trace stopped before its files were written "
            f"({absent[0]} is missing): {continue_hint(root, manifest)}"
        )
    if not (root / REQUESTS).is_file():
        raise TokenlensError(f"{root}: not a complete run ({REQUESTS} is missing)")
    requests = _read_table(root / REQUESTS, REQUESTS_SCHEMA, REQUESTS_OPTIONAL)
    metrics_raw = _read_json(root / METRICS)
    try:
        metrics = SpecCounters.from_json(metrics_raw)
    except (KeyError, TypeError, ValueError):
        raise TokenlensError(
            f"{root / METRICS}: needs num_drafts, num_draft_tokens, num_accepted_tokens, "
            "accepted_per_position"
        ) from None
    events = (
        _read_table(root / EVENTS, EVENTS_SCHEMA, EVENTS_OPTIONAL)
        if (root / EVENTS).is_file()
        else None
    )
    return Run(path=root, manifest=manifest, requests=requests, metrics=metrics, events=events)
