"""The run a replay starts from: checked, and unpacked into what replay needs.

A source must be a complete greedy run with one sample per prompt and the prompt
token ids vLLM prefilled (recorded since requests.parquet gained
``prompt_token_ids``). Its events, if any, also tell a few of the target's tokens past
the end of each output: vLLM verifies a whole step before a stop cuts it, and the
capture records what came out there (``emitted_token_id`` with a null
``output_index``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from tokenlens.errors import TokenlensError
from tokenlens.models.embedded import lookup
from tokenlens.models.resolve import resolve_model
from tokenlens.progress import SILENT, Progress
from tokenlens.rundir import Run, continue_hint, read_run

# trace's default; run manifests record their own since replay needed it
DEFAULT_MAX_MODEL_LEN = 4096


@dataclass(frozen=True)
class SourceRequest:
    """One request of the source run."""

    request_id: str
    prompt_ids: tuple[int, ...]
    output: tuple[int, ...]
    # The target's tokens right after the output's end, as far as the source's events show.
    lookahead: tuple[int, ...] = ()

    @property
    def sequence(self) -> tuple[int, ...]:
        return self.prompt_ids + self.output


@dataclass(frozen=True)
class Source:
    """A run to replay from, with the engine settings its numbers depend on."""

    run: Run
    requests: tuple[SourceRequest, ...]
    dtype: str
    max_model_len: int
    max_model_len_recorded: bool

    @property
    def manifest(self) -> dict[str, Any]:
        return self.run.manifest

    @property
    def method(self) -> str:
        return str(self.manifest["speculative"].get("method") or "none")


def _lookahead(events: pa.Table | None) -> dict[str, tuple[int, ...]]:
    """Per request, the target's tokens past the end that the last step verified."""
    if events is None or events.num_rows == 0:
        return {}
    found: dict[str, tuple[int, ...]] = {}
    last: dict[str, tuple[int, list[dict[str, Any]]]] = {}
    for row in events.to_pylist():
        rid, step = row["request_id"], row["step"]
        if rid not in last or step > last[rid][0]:
            last[rid] = (step, [])
        if step == last[rid][0]:
            last[rid][1].append(row)
    for rid, (_, rows) in last.items():
        rows.sort(key=lambda r: r["position"])
        cut = [r["emitted_token_id"] for r in rows if r["output_index"] is None]
        past = [t for t in cut if t is not None]
        if past and rows[0]["output_index"] is not None:
            found[rid] = tuple(int(t) for t in past)
    return found


def read_source(path: str | Path) -> Source:
    """Read and check a run for replay; every refusal is one line saying why."""
    run = read_run(path)
    where = run.path
    if not run.complete:
        raise TokenlensError(
            f"{where} is a partial run: replay needs a complete one "
            f"({continue_hint(where, run.manifest)})"
        )
    sampling = run.manifest.get("sampling") or {}
    if float(sampling.get("temperature", 0.0)) != 0.0:
        raise TokenlensError(
            f"{where} was sampled at temperature {sampling.get('temperature')}: replay needs "
            "greedy decoding (temperature 0), where the target's tokens do not depend on "
            "the drafter"
        )
    rows = run.requests.select(["request_id", "prompt_token_ids", "output_token_ids"]).to_pylist()
    if any(r["prompt_token_ids"] is None for r in rows):
        raise TokenlensError(
            f"{where}: requests.parquet has no prompt_token_ids (the run predates them): "
            "trace it again to replay it"
        )
    if any("#" in r["request_id"] for r in rows):
        raise TokenlensError(f"{where} has several samples per prompt: replay needs one")
    ahead = _lookahead(run.events)
    requests = tuple(
        SourceRequest(
            request_id=r["request_id"],
            prompt_ids=tuple(int(t) for t in r["prompt_token_ids"]),
            output=tuple(int(t) for t in r["output_token_ids"]),
            lookahead=ahead.get(r["request_id"], ()),
        )
        for r in rows
    )
    dtype = str(run.manifest.get("dtype") or "").removeprefix("torch.")
    recorded = run.manifest.get("max_model_len")
    return Source(
        run=run,
        requests=requests,
        dtype=dtype,
        max_model_len=int(recorded or DEFAULT_MAX_MODEL_LEN),
        max_model_len_recorded=recorded is not None,
    )


def resolve_recorded_model(
    name: str, cache: Path | None = None, progress: Progress = SILENT
) -> str:
    """A model as a manifest records it (embedded: ``key@<sha prefix>``) -> a path for vLLM."""
    key, sep, digest = name.partition("@")
    embedded = lookup(key) if sep else None
    if embedded is not None:
        if not embedded.gguf_sha256.startswith(digest):
            raise TokenlensError(
                f"the run used {name}, but this tokenlens builds {key}@"
                f"{embedded.gguf_sha256[:12]}: replay needs the same weights"
            )
        return resolve_model(key, cache, progress)
    return resolve_model(name, cache, progress)
