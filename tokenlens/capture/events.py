"""Step files -> ``events.parquet`` rows and reconstructed outputs. No vLLM import.

A step line holds ``seq``, ``t``, the hook's own timing (``h``, ``w``, ``wt``: see
:mod:`tokenlens.capture.plugin`) and the step's records: ``reqs`` (a list, as written
before 2026-12-03) or ``cols`` (the same as columns, as the hook writes them now:
:func:`tokenlens.capture.step_records.line_records`). A step record holds, for one request in one
scheduler step: ``r`` engine request id, ``b`` output length before the step, ``g``
sampled tokens (accepted drafts + one correction or bonus), ``n`` how many of ``g``
vLLM appended (fewer when a stop condition cut the step short), and, when vLLM counted
a verification step, ``d`` the scheduled drafts, ``a`` the accepted count and ``i``
the drafts invalidated by a grammar (excluded from vLLM's counts, so from ours).

Where the scheduler saw ``-1`` placeholders, the model runner's ``drafts-*.jsonl``
(:mod:`tokenlens.capture.runner_drafts`, Model Runner V2) may hold the real ids of the
same step, keyed by the same ``(r, b)``. They replace the placeholders only if every
accepted draft equals the token that came out (and every id the scheduler did see
agrees); a step that fails the check keeps its ``-1``s and is counted in
``Capture.draft_ids["disagreements"]``.

Under data parallelism each engine core writes its own step file; a request runs on one
core, so the events are the union of the files, and a request found in two files fails
the capture (``Capture.split``). Under tensor parallelism one rank writes the runner's file;
a step found in two runner files is counted in ``draft_ids["duplicate_writers"]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from tokenlens.capture.step_records import line_records

_SUFFIX = re.compile(r"^(?P<base>.+)-[0-9a-f]{8}$")
_CHILD = re.compile(r"^(?P<index>\d+)_(?P<parent>.+)$")
# vLLM's OpenAI server prefixes request ids before adding its own suffix.
SERVER_ID_PREFIXES = ("chatcmpl-", "cmpl-")

# ``events.parquet`` of a run directory (docs/formats.md): one row per draft token per
# verification step.
EVENTS_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("step", pa.int64()),
        ("position", pa.int64()),
        ("draft_token_id", pa.int64()),
        ("accepted", pa.bool_()),
        ("emitted_token_id", pa.int64()),
        ("output_index", pa.int64()),
    ]
)
# Columns added after run directories were first written: readers of older directories
# get them null-filled (:func:`tokenlens.rundir.read_run`).
EVENTS_OPTIONAL = pa.schema(
    [
        # How many drafts vLLM scheduled for this request in this step, grammar-invalidated
        # ones included: k, which varies per step under vLLM's dynamic speculative
        # decoding (num_speculative_tokens_per_batch_size). Null: not recorded.
        ("k", pa.int64()),
        # The draft was not proposed by a drafter but filled in by vLLM (Model Runner
        # V2's n-gram repeats the last token where it has no match;
        # :mod:`tokenlens.capture.filler`); null where the runner never fills.
        ("filler", pa.bool_()),
    ]
)
# What the capture writes; ``filler`` is added afterwards, where a fill rule applies.
EVENTS_WRITE_SCHEMA = pa.schema([*EVENTS_SCHEMA, EVENTS_OPTIONAL.field("k")])
RUNNER_DRAFTS_GLOB = "drafts-*.jsonl"


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file, skipping a torn last line (a killed writer)."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.endswith("\n"):
                return  # the writer died mid-line
            yield json.loads(line)


def step_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("steps-*.jsonl"))


def load_id_map(directory: Path) -> dict[str, str]:
    """Engine request id -> run request id, from the worker's ``submitted-*.jsonl``."""
    mapping: dict[str, str] = {}
    for path in sorted(directory.glob("submitted-*.jsonl")):
        for rec in read_jsonl(path):
            mapping[rec["internal"]] = rec["request_id"]
    return mapping


def run_request_id(engine_id: str, id_map: dict[str, str]) -> str:
    """Map an engine id (``<id>-<8 hex>``, children ``<i>_<id>-<8 hex>``) to the run's id."""
    if engine_id in id_map:
        return id_map[engine_id]
    child = _CHILD.match(engine_id)
    if child and child.group("parent") in id_map:
        return f"{id_map[child.group('parent')]}#{child.group('index')}"
    suffix = _SUFFIX.match(engine_id)
    base = suffix.group("base") if suffix else engine_id
    for prefix in SERVER_ID_PREFIXES:  # ids of requests that came through vllm serve
        if base.startswith(prefix) and base[len(prefix) :] in id_map:
            return id_map[base[len(prefix) :]]
    return base


@dataclass
class Capture:
    """Everything recorded: events per the contract, and outputs rebuilt from steps."""

    rows: dict[str, list[Any]] = field(
        default_factory=lambda: {k: [] for k in EVENTS_WRITE_SCHEMA.names}
    )
    outputs: dict[str, list[int]] = field(default_factory=dict)
    gaps: list[str] = field(default_factory=list)
    # Verification steps vLLM counted whose drafts were all invalidated by a grammar
    # (structured output): a draft to vLLM (num_drafts + 1) with no draft token, so
    # no event row. (run request id, step), in the order recorded.
    empty_steps: list[tuple[str, int]] = field(default_factory=list)
    # The hook's self-timing per step line: (hook s on the scheduler thread, wall s since
    # the previous line or None for a process's first line, writer-thread s or None).
    timing: list[tuple[float, float | None, float | None]] = field(default_factory=list)
    # Draft ids: event rows whose id the scheduler saw as -1 ("placeholders"), how many
    # of them the model runner's records supplied ("recovered"), steps whose runner
    # record contradicted the scheduler's verdicts ("disagreements"), runner records.
    # The manifest's ``capture.filler_drafts`` (set by :func:`.filler.mark_fillers`).
    fillers: dict[str, Any] | None = None
    draft_ids: dict[str, int] = field(
        default_factory=lambda: {
            "placeholders": 0,
            "recovered": 0,
            "disagreements": 0,
            "runner_records": 0,
            "duplicate_writers": 0,
        }
    )
    # Step files per engine process (``steps-<tag>.jsonl``, one per engine core) and the
    # steps with drafts each recorded: under data parallelism, the cores' shares.
    cores: dict[str, int] = field(default_factory=dict)
    # Requests found in the step files of two engine processes (a request runs on one
    # engine core: its steps would be numbered wrongly, so the capture fails).
    split: list[str] = field(default_factory=list)

    def table(self) -> pa.Table:
        return pa.table(self.rows, schema=EVENTS_WRITE_SCHEMA)


def _add_output(capture: Capture, rid: str, base: int, tokens: list[int]) -> None:
    out = capture.outputs.setdefault(rid, [])
    if base != len(out):
        capture.gaps.append(f"{rid}: step lands at {base} but {len(out)} tokens are known")
        del out[base:]
        out.extend([-1] * (base - len(out)))
    out.extend(tokens)


def load_runner_drafts(
    directory: Path, duplicates: list[str] | None = None
) -> dict[tuple[str, int], list[int]]:
    """``(engine request id, b) -> drafts`` from the model runner's files (last one wins:
    a step vLLM re-ran after a preemption replaces the stale one).

    One engine has one writing runner (:mod:`tokenlens.capture.layout`), so a key found
    in two files means two ranks recorded the same step: it is appended to
    ``duplicates`` (the manifest's ``draft_ids.duplicate_writers``).
    """
    out: dict[tuple[str, int], list[int]] = {}
    owner: dict[tuple[str, int], str] = {}
    for path in sorted(directory.glob(RUNNER_DRAFTS_GLOB)):
        for line in read_jsonl(path):
            for rec in line["reqs"]:
                key = (rec["r"], rec["b"])
                if owner.setdefault(key, path.name) != path.name and duplicates is not None:
                    duplicates.append(f"{key[0]} at {key[1]}: {owner[key]} and {path.name}")
                out[key] = rec["d"]
    return out


def recover_drafts(rec: dict[str, Any], runner: list[int] | None) -> list[int] | None:
    """The step's drafts with the runner's ids in place of ``-1``, if they fit its verdicts.

    Fits: the runner has at least as many drafts, agrees with every id the scheduler
    saw, and every accepted draft equals the token that came out there.
    """
    drafts, generated = rec["d"], rec["g"]
    if runner is None or len(runner) < len(drafts):
        return None
    merged = [r if d < 0 else d for d, r in zip(drafts, runner, strict=False)]
    if any(d >= 0 and d != r for d, r in zip(drafts, runner, strict=False)):
        return None
    accepted = min(rec["a"], len(generated))
    if any(merged[pos] != generated[pos] for pos in range(accepted)):
        return None
    return merged


def _add_events(
    capture: Capture,
    rid: str,
    step: int,
    rec: dict[str, Any],
    runner: dict[tuple[str, int], list[int]] | None = None,
) -> None:
    drafts, generated, accepted = rec["d"], rec["g"], rec["a"]
    base, kept = rec.get("b"), rec.get("n", 0)
    judged_rows = len(drafts) - rec.get("i", 0)
    placeholders = sum(1 for d in drafts[:judged_rows] if d < 0)
    if placeholders:
        capture.draft_ids["placeholders"] += placeholders
        if runner:
            found = runner.get((rec["r"], base)) if base is not None else None
            merged = recover_drafts(rec, found)
            if merged is not None:
                drafts = merged
                capture.draft_ids["recovered"] += placeholders
            elif found is not None:
                capture.draft_ids["disagreements"] += 1
    rows = capture.rows
    if judged_rows <= 0:
        capture.empty_steps.append((rid, step))
    for pos in range(judged_rows):
        is_accepted = pos < accepted
        emitted = generated[pos] if pos <= accepted and pos < len(generated) else None
        index = base + pos if emitted is not None and base is not None and pos < kept else None
        rows["request_id"].append(rid)
        rows["step"].append(step)
        rows["position"].append(pos)
        rows["draft_token_id"].append(drafts[pos])
        rows["accepted"].append(is_accepted)
        rows["emitted_token_id"].append(emitted)
        rows["output_index"].append(index)
        rows["k"].append(len(drafts))


def build_capture(
    directory: Path, id_map: dict[str, str] | None = None, keep: set[str] | None = None
) -> Capture:
    """Read every step file of a trace directory into events and outputs.

    ``id_map`` (default: the worker's ``submitted-*.jsonl``) maps engine or client ids
    to run ids; with ``keep``, requests outside it (other clients of a shared server,
    earlier runs in the same directory) are ignored.
    """
    id_map = load_id_map(directory) if id_map is None else id_map
    capture = Capture()
    duplicates: list[str] = []
    runner = load_runner_drafts(directory, duplicates)
    capture.draft_ids["runner_records"] = len(runner)
    capture.draft_ids["duplicate_writers"] = len(duplicates)
    steps: dict[str, int] = {}
    home: dict[str, str] = {}  # run request id -> the step file that recorded it
    for path in step_files(directory):
        capture.cores[path.name] = 0
        for line in read_jsonl(path):
            if "h" in line:  # written since the hook times itself
                capture.timing.append((line["h"], line.get("w"), line.get("wt")))
            for rec in line_records(line):
                rid = run_request_id(rec["r"], id_map)
                if keep is not None and rid not in keep:
                    continue
                if rec.get("n") and rec.get("b") is not None:
                    _add_output(capture, rid, rec["b"], rec["g"][: rec["n"]])
                if home.setdefault(rid, path.name) != path.name and rid not in capture.split:
                    capture.split.append(rid)
                if "d" in rec:
                    _add_events(capture, rid, steps.get(rid, 0), rec, runner)
                    steps[rid] = steps.get(rid, 0) + 1
                    capture.cores[path.name] += 1
    return capture
