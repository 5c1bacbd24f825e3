"""``results.csv``: one row per bench case, the file every bench table and chart reads.

The columns are documented in docs/bench.md; :data:`COLUMNS` is their order. Empty
fields mean "does not apply" (acceptance of a baseline, speedup without a matching
baseline). Rates are medians over the measured repeats; counters are sums over them.

It sits below both the bench (which writes it) and the analysis and reports (which read
it), so that reading bench results never makes the analysis depend on the bench
package (docs/architecture.md).
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tokenlens.errors import TokenlensError

RESULTS_CSV = "results.csv"
RESULTS_MD = "results.md"
BENCH_JSON = "bench.json"

# (column, type): the order of results.csv.
COLUMNS: tuple[tuple[str, type], ...] = (
    ("case_id", str),
    ("model", str),
    ("model_path", str),
    ("dtype", str),
    ("quantization", str),
    ("method_label", str),
    ("method", str),
    ("k", int),
    ("draft_model", str),
    ("corpus", str),
    ("length", str),
    ("lang", str),
    ("prompts", int),
    ("warmup", int),
    ("repeats", int),
    ("concurrency", int),
    ("output_tokens", int),
    ("output_chars", int),
    ("output_bytes", int),
    ("tok_s", float),
    ("tok_s_min", float),
    ("tok_s_max", float),
    ("tok_s_cv", float),
    ("chars_s", float),
    ("chars_s_min", float),
    ("chars_s_max", float),
    ("bytes_s", float),
    ("bytes_s_min", float),
    ("bytes_s_max", float),
    ("ttft_s", float),
    ("wall_s", float),
    ("num_drafts", int),
    ("num_draft_tokens", int),
    ("num_accepted_tokens", int),
    ("acceptance_rate", float),
    ("mean_acceptance_length", float),
    ("acceptance_per_position", list),
    ("baseline_case_id", str),
    ("speedup_tok_s", float),
    ("speedup_chars_s", float),
    ("run_dir", str),
    ("signature", str),
    # Added with the like-for-like rule and the step split (issue 31); a results.csv
    # written before lacks them and reads as None (:func:`read_results`).
    ("model_runner", str),
    ("async_scheduling", bool),
    ("speedup_note", str),
    ("step_ms", float),
    ("draft_ms", float),
    ("verify_ms", float),
    ("step_timing", str),
    ("timed_steps", int),
    ("timer_us", float),
    ("baseline_step_ms", float),
    ("draft_cost", float),
    ("draft_target_steps", float),
    ("warning", str),
    ("plain_tok_s", float),
    ("plain_tok_s_min", float),
    ("plain_tok_s_max", float),
    ("traced_over_plain", float),
    # Added when rows started to record the bench invocation that measured them
    # (rows.measuring_session); earlier files lack them and read as None.
    ("session", str),
    ("plain_same_session", bool),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)
# Earlier formats, each read as written: before issue 31, and before sessions.
FIRST_COLUMNS = COLUMN_NAMES[: COLUMN_NAMES.index("signature") + 1]
SECOND_COLUMNS = COLUMN_NAMES[: COLUMN_NAMES.index("traced_over_plain") + 1]
_TYPES = dict(COLUMNS)

Row = dict[str, Any]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else repr(round(value, 6))
    if isinstance(value, list | tuple):
        return json.dumps([round(v, 6) if isinstance(v, float) else v for v in value])
    return str(value)


def write_results(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write ``rows`` (dicts keyed by :data:`COLUMN_NAMES`) atomically."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(COLUMN_NAMES)
        for row in rows:
            writer.writerow([_cell(row.get(name)) for name in COLUMN_NAMES])
    os.replace(tmp, path)


def _parse(name: str, text: str, where: str) -> Any:
    if text == "":
        return None
    kind = _TYPES[name]
    try:
        if kind is list:
            return json.loads(text)
        if kind is bool:
            if text not in ("True", "False"):
                raise ValueError(text)
            return text == "True"
        return kind(text)
    except ValueError:
        raise TokenlensError(
            f"{where}: column {name!r} holds {text!r}, not {kind.__name__}"
        ) from None


def read_results(path: Path) -> list[Row]:
    """Rows of a ``results.csv`` with typed values (``None`` for empty fields)."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None or tuple(header) not in (COLUMN_NAMES, SECOND_COLUMNS, FIRST_COLUMNS):
                raise TokenlensError(
                    f"{path}: not a tokenlens results.csv (header differs from docs/bench.md)"
                )
            names = tuple(header)
            return [
                {name: None for name in COLUMN_NAMES}
                | {
                    name: _parse(name, text, f"{path}:{lineno}")
                    for name, text in zip(names, cells, strict=True)
                }
                for lineno, cells in enumerate(reader, start=2)
            ]
    except OSError as exc:
        raise TokenlensError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:  # wrong number of cells
        raise TokenlensError(f"{path}: malformed row ({exc})") from None


def setup_label(row: Mapping[str, Any]) -> str:
    """``V1, async off``: the model runner and async scheduling vLLM resolved for a case
    (``runner unknown`` for a bench written before they were recorded)."""
    runner, is_async = row.get("model_runner"), row.get("async_scheduling")
    if runner is None and is_async is None:
        return "runner unknown"
    flag = "async ?" if is_async is None else ("async on" if is_async else "async off")
    return f"{runner or 'runner ?'}, {flag}"
