"""Step files -> ``events.parquet`` rows and reconstructed outputs. No vLLM import.

A step line holds ``seq``, ``t``, the hook's own timing (``h``, ``w``, ``wt``: see
:mod:`tokenlens.capture.plugin`) and ``reqs``. A step record holds, for one request in one
scheduler step: ``r`` engine request id, ``b`` output length before the step, ``g``
sampled tokens (accepted drafts + one correction or bonus), ``n`` how many of ``g``
vLLM appended (fewer when a stop condition cut the step short), and, when vLLM counted
a verification step, ``d`` the scheduled drafts, ``a`` the accepted count and ``i``
the drafts invalidated by a grammar (excluded from vLLM's counts, so from ours).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

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
# Columns added after run directories were first written: writers always write them,
# readers of older directories get them null-filled (:func:`tokenlens.rundir.read_run`).
EVENTS_OPTIONAL = pa.schema(
    [
        # How many drafts vLLM scheduled for this request in this step, grammar-invalidated
        # ones included: k, which varies per step under vLLM's dynamic speculative
        # decoding (num_speculative_tokens_per_batch_size). Null: not recorded.
        ("k", pa.int64()),
    ]
)
EVENTS_WRITE_SCHEMA = pa.schema([*EVENTS_SCHEMA, *EVENTS_OPTIONAL])


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

    def table(self) -> pa.Table:
        return pa.table(self.rows, schema=EVENTS_WRITE_SCHEMA)


def _add_output(capture: Capture, rid: str, base: int, tokens: list[int]) -> None:
    out = capture.outputs.setdefault(rid, [])
    if base != len(out):
        capture.gaps.append(f"{rid}: step lands at {base} but {len(out)} tokens are known")
        del out[base:]
        out.extend([-1] * (base - len(out)))
    out.extend(tokens)


def _add_events(capture: Capture, rid: str, step: int, rec: dict[str, Any]) -> None:
    drafts, generated, accepted = rec["d"], rec["g"], rec["a"]
    base, kept = rec.get("b"), rec.get("n", 0)
    rows = capture.rows
    counted = len(drafts) - rec.get("i", 0)
    if counted <= 0:
        capture.empty_steps.append((rid, step))
    for pos in range(counted):
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
    steps: dict[str, int] = {}
    for path in step_files(directory):
        for line in read_jsonl(path):
            if "h" in line:  # written since the hook times itself
                capture.timing.append((line["h"], line.get("w"), line.get("wt")))
            for rec in line["reqs"]:
                rid = run_request_id(rec["r"], id_map)
                if keep is not None and rid not in keep:
                    continue
                if rec.get("n") and rec.get("b") is not None:
                    _add_output(capture, rid, rec["b"], rec["g"][: rec["n"]])
                if "d" in rec:
                    _add_events(capture, rid, steps.get(rid, 0), rec)
                    steps[rid] = steps.get(rid, 0) + 1
    return capture
