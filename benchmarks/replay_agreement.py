"""Replay against tracing on real vLLM: the agreement table of docs/replay.md.

For the prompts given: a real trace of every (method, k) in --trace, one replay of
every method and k from the --source trace, then the replayed events against the
traced ones, row for row. Prints, per (method, k): requests, event rows, equal rows
and mismatching requests, and explains each mismatching request by its first
difference: a target near-tie (the two runs' outputs differ), a drafter near-tie
between vLLM's prefill path (the replay's teacher-forced pass) and its decode path
(the proposer), a target near-tie past the end of an output (the look-ahead), vLLM's
padding of a waiting request, or "UNEXPLAINED" (a vLLM rule replay does not
reproduce: a bug). Margins are logprob(top-1) - logprob(top-2) from vLLM.

Traces already complete under --work are reused, so an interrupted run resumes.
Run it under the vLLM lock; it starts one engine per trace and one or two for the
replay:

    flock /tmp/tokenlens-vllm.lock python benchmarks/replay_agreement.py --work /tmp/agree

The full study's run set (one draft-model trace, replays of both drafters at k=1..5,
one n-gram trace to validate them) over every corpus pair at 128 tokens:

    flock /tmp/tokenlens-vllm.lock python benchmarks/replay_agreement.py --work /tmp/full \\
        --prompts corpora/*.jsonl --exclude smoke --max-tokens 128 \\
        --trace draft_model:3 --trace ngram:3 --replay-k 1-5
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from tokenlens.cli.replay import parse_ks
from tokenlens.engine.config import SamplingConfig
from tokenlens.errors import TokenlensError
from tokenlens.replay.compare import Agreement, RequestDiff, compare_runs
from tokenlens.replay.run import ReplayConfig, run_replay
from tokenlens.rundir import Run, read_run
from tokenlens.trace import TraceConfig, run_trace

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Cell:
    method: str
    k: int

    @property
    def name(self) -> str:
        return f"{self.method}-k{self.k}"


def parse_cells(items: Sequence[str]) -> list[Cell]:
    cells = []
    for item in items:
        method, _, ks = item.partition(":")
        cells += [Cell(method, k) for k in parse_ks(ks or "3")]
    return cells


def prompt_file(args: argparse.Namespace) -> Path:
    """The prompts as one file; with --max-tokens every prompt's own limit is replaced."""
    files = [Path(p) for p in args.prompts if Path(p).stem not in args.exclude]
    if len(files) == 1 and args.max_tokens is None:
        return files[0]
    out = args.work / "prompts.jsonl"
    lines = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                prompt = json.loads(line)
                if args.max_tokens is not None:
                    prompt["max_tokens"] = args.max_tokens
                lines.append(json.dumps(prompt, ensure_ascii=False))
    args.work.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def trace(cell: Cell, prompts: Path, args: argparse.Namespace) -> tuple[Path, float | None]:
    out = args.work / "traces" / cell.name
    try:
        if read_run(out).complete:
            return out, None
    except TokenlensError:
        pass
    t0 = time.perf_counter()
    run_trace(
        TraceConfig(
            prompts=prompts,
            out=out,
            method=cell.method,
            k=cell.k,
            sampling=SamplingConfig(max_tokens=256, logprobs=10),
            concurrency=args.concurrency,
            dtype=args.dtype,
            max_model_len=args.max_model_len,
            allow_capped_output=True,  # small --max-model-len probes vLLM's caps on purpose
            overwrite=True,
        )
    )
    return out, time.perf_counter() - t0


def _margin(top_logprobs: list[float] | None) -> float | None:
    if not top_logprobs or len(top_logprobs) < 2:
        return None
    return float(top_logprobs[0] - top_logprobs[1])


def _fmt(margin: float | None) -> str:
    return "unknown" if margin is None or math.isnan(margin) else f"{margin:.4f}"


class Explainer:
    """Names the cause of a request's first difference, with vLLM's margins."""

    def __init__(self, source: Run, predictions: Path, near_tie: float) -> None:
        self.near_tie = near_tie
        self.pred = {r["request_id"]: r for r in pq.read_table(predictions).to_pylist()}
        self.source_out = {
            r["request_id"]: (r["output_token_ids"], r["top_logprobs"])
            for r in source.requests.to_pylist()
        }

    def _tie(self, what: str, margin: float | None) -> str:
        ok = margin is not None and not math.isnan(margin) and margin < self.near_tie
        label = "near-tie" if ok else "UNEXPLAINED (not a near-tie)"
        return f"{what}: margin {_fmt(margin)} -> {label}"

    def explain(self, diff: RequestDiff, cell: Cell, traced: Run) -> str:
        rid = diff.request_id
        if diff.output_divergence is not None:
            i = diff.output_divergence
            mine = {r["request_id"]: r for r in traced.requests.to_pylist()}[rid]
            tops = mine["top_logprobs"]
            m_trace = _margin(tops[i]) if tops and i < len(tops) else None
            src_tops = self.source_out[rid][1]
            m_src = _margin(src_tops[i]) if src_tops and i < len(src_tops) else None
            margin = min((m for m in (m_trace, m_src) if m is not None), default=None)
            return self._tie(
                f"the target's output differs from the source's at index {i} "
                f"(target margins {_fmt(m_trace)} traced, {_fmt(m_src)} source)",
                margin,
            )
        t, r = diff.first_traced, diff.first_replayed
        if t is None or r is None:
            return "UNEXPLAINED: one run has more event rows than the other"
        assert traced.events is not None
        step_rows = [
            row
            for row in traced.events.to_pylist()
            if row["request_id"] == rid and row["step"] == t["step"]
        ]
        if all(row["draft_token_id"] == -1 for row in step_rows):
            return "vLLM padded a waiting request's step with [-1]*k drafts (not replayed)"
        start = next(row["output_index"] for row in step_rows if row["position"] == 0)
        i = start + t["position"]
        p = self.pred.get(rid) or {}
        end = len(self.source_out[rid][0])
        if t["draft_token_id"] != r["draft_token_id"]:
            if cell.method != "draft_model":
                return f"UNEXPLAINED: n-gram drafts differ at output index {i}"
            judged = t["emitted_token_id"] is not None
            rejected_at = next(
                (row["position"] for row in step_rows if not row["accepted"]), t["position"]
            )
            if judged or t["position"] == rejected_at:
                if i < end:
                    margin = (p.get("drafter_margin") or [None] * (i + 1))[i]
                else:
                    margin = (p.get("drafter_continuation_margin") or [None] * (i - end + 1))[
                        i - end
                    ]
                return self._tie(
                    f"the drafter's greedy token at output index {i} (teacher-forced prefill "
                    f"{r['draft_token_id']}, the proposer's decode {t['draft_token_id']})",
                    margin,
                )
            point = start + rejected_at
            points = p.get("branch_points") or []
            if point in points:
                margins = p["branch_margins"][points.index(point)]
                offset = i - point - 1
                margin = margins[offset] if offset < len(margins) else None
                return self._tie(
                    f"a draft after a rejection (branch at output index {point}, "
                    f"+{offset + 1}): {r['draft_token_id']} replayed, {t['draft_token_id']} traced",
                    margin,
                )
            return f"UNEXPLAINED: draft after a rejection at output index {i} not replayed"
        if i >= end:
            ahead = p.get("lookahead_margin") or []
            margin = ahead[i - end] if i - end < len(ahead) else None
            return self._tie(
                f"the target's token {i - end + 1} past the end of the output "
                f"(look-ahead from {p.get('lookahead_from')})",
                margin,
            )
        return f"UNEXPLAINED: same draft, different verdict at output index {i}"


def table(rows: list[tuple[Cell, Agreement]]) -> str:
    lines = [
        "| method | k | requests | event rows (traced) | event rows (replayed) | equal rows "
        "| mismatching requests |",
        "|---|---|---|---|---|---|---|",
    ]
    for cell, a in rows:
        lines.append(
            f"| {cell.method} | {cell.k} | {a.requests} | {a.rows_traced} | {a.rows_replayed} "
            f"| {a.equal_rows} | {len(a.differing)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="traces, replays, report")
    parser.add_argument("--prompts", nargs="+", default=[str(REPO / "corpora" / "demo.jsonl")])
    parser.add_argument("--exclude", nargs="*", default=[], help="prompt file stems to skip")
    parser.add_argument("--max-tokens", type=int, help="replace every prompt's max_tokens")
    parser.add_argument(
        "--trace", action="append", help="METHOD:K,K traced (default draft_model/ngram 1,3,5)"
    )
    parser.add_argument("--source", default="draft_model:3", help="METHOD:K replayed from")
    parser.add_argument("--replay-k", type=parse_ks, help="k values replayed (default: traced)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--dtype", default="float32", help="as the demo plans")
    parser.add_argument(
        "--max-model-len", type=int, default=4096, help="small values exercise vLLM's caps"
    )
    parser.add_argument("--near-tie", type=float, default=0.05, help="margin below: near-tie")
    parser.add_argument("--no-branch-drafts", action="store_true")
    args = parser.parse_args()
    cells = parse_cells(args.trace or ["draft_model:1,3,5", "ngram:1,3,5"])
    (source_cell,) = parse_cells([args.source])
    if source_cell not in cells:
        cells.insert(0, source_cell)
    prompts = prompt_file(args)
    timings: dict[str, float] = {}
    paths = {}
    for cell in cells:
        paths[cell], seconds = trace(cell, prompts, args)
        if seconds is not None:
            timings[f"trace {cell.name}"] = seconds
        print(f"traced {cell.name}: {paths[cell]}", flush=True)
    methods = tuple(dict.fromkeys(c.method for c in cells))
    ks = args.replay_k or tuple(sorted({c.k for c in cells}))
    t0 = time.perf_counter()
    result = run_replay(
        ReplayConfig(
            source=paths[source_cell],
            out=args.work / "replay",
            methods=methods,
            ks=ks,
            branch_drafts=not args.no_branch_drafts,
            overwrite=True,
        )
    )
    timings[f"replay {','.join(methods)} k={','.join(map(str, ks))}"] = time.perf_counter() - t0
    source = read_run(paths[source_cell])
    explainer = Explainer(source, result.predictions, args.near_tie)
    rows = []
    notes = []
    for cell in cells:
        traced = read_run(paths[cell])
        agreement = compare_runs(traced, read_run(args.work / "replay" / cell.name))
        rows.append((cell, agreement))
        for diff in agreement.differing:
            why = explainer.explain(diff, cell, traced)
            notes.append(
                f"- {cell.name} {diff.request_id}: {diff.equal_rows}/{diff.rows_traced} rows "
                f"equal; first difference at step {(diff.first_traced or {}).get('step')}, "
                f"position {(diff.first_traced or {}).get('position')}: {why}"
            )
    report: list[str] = [
        f"Replay from {source_cell.name} against real traces ({prompts}); vLLM engines on "
        "a shared machine.",
        "",
        table(rows),
        "",
        *(notes or ["Every replayed event equals the traced one."]),
        "",
        "Wall time (s): " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()),
        f"Replay details: {json.dumps(result.info, default=str)}",
    ]
    text = "\n".join(report)
    print(text)
    (args.work / "agreement.md").write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
