"""Two engine cores of two tensor-parallel ranks each, writing into one trace directory.

Four processes (parallel_ranks.py): per core, vLLM's real parallel state (gloo, world 2),
vLLM's real scheduler with the tokenlens hook on rank 0, and on both ranks the Model
Runner V2 stand-in with the draft-id hook. The events must be the union of both cores'
drafts, each exactly once, reconciled with vLLM's counters summed over the cores, with
every draft id from the one writing rank of each core.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.capture.parallel_ranks import engine_rank
from tokenlens.capture.events import build_capture
from tokenlens.capture.layout import IDLE, options_refusal, single_worker, writer_ranks
from tokenlens.capture.reconcile import reconcile, reconcile_per_request
from tokenlens.capture.summary import capture_summary, parallel_seen, with_parallel_seen
from tokenlens.engine.results import SpecCounters

pytest.importorskip("vllm", reason="the vLLM CPU build is part of the test environment")
CORES, RANKS = (0, 1), (0, 1)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run the four processes once; their trace directory and what each returned."""
    tmp = tmp_path_factory.mktemp("parallel")
    trace = tmp / "capture"
    ctx = multiprocessing.get_context("spawn")
    ports = {c: _port() for c in CORES}
    procs = {
        (c, r): ctx.Process(
            target=engine_rank,
            args=(c, r, ports[c], str(trace), str(tmp / "model"), str(tmp / f"out-{c}-{r}.json")),
        )
        for c in CORES
        for r in RANKS
    }
    for p in procs.values():
        p.start()
    for p in procs.values():
        p.join(timeout=600)
    bad = {key: p.exitcode for key, p in procs.items() if p.exitcode != 0}
    for p in procs.values():
        if p.is_alive():
            p.kill()
    assert not bad, f"worker processes failed: {bad}"
    outs = {key: json.loads((tmp / f"out-{key[0]}-{key[1]}.json").read_text()) for key in procs}
    return {"trace": trace, "outs": outs}


@pytest.mark.vllm
def test_events_are_the_union_of_both_cores_drafts_once(layout: dict[str, Any]) -> None:
    trace, outs = layout["trace"], layout["outs"]
    capture = build_capture(trace, id_map={})
    events = capture.table()
    counters = SpecCounters()
    per_request: dict[str, Any] = {}
    for c in CORES:
        counters = counters + SpecCounters.from_json(outs[(c, 0)]["stats"])
        per_request.update(outs[(c, 0)]["per_request"])
        # both ranks of a core verified the same drafts (vLLM's broadcast batch)
        assert outs[(c, 0)]["proposed"] == outs[(c, 1)]["proposed"]
    assert counters.num_draft_tokens > 0 and set(per_request) == {
        f"c{c}r{i}" for c in CORES for i in range(3)
    }
    # exactly once: reconciled with the counters summed over the cores, per request too
    assert reconcile(events, counters) == []
    assert reconcile_per_request(events, per_request) == []
    rows = events.to_pylist()
    keys = [(e["request_id"], e["step"], e["position"]) for e in rows]
    assert len(keys) == len(set(keys)) == counters.num_draft_tokens
    assert {e["request_id"] for e in rows} == set(per_request)
    # every draft id came from the writing rank and is the one verified there
    truth = {(rid.split("-")[0], b): d for c in CORES for rid, b, d in outs[(c, 0)]["proposed"]}
    steps: dict[tuple[str, int], list[int]] = {}
    first: dict[tuple[str, int], int] = {}
    for e in rows:
        steps.setdefault((e["request_id"], e["step"]), []).append(e["draft_token_id"])
        if e["position"] == 0:
            first[(e["request_id"], e["step"])] = e["output_index"]
    assert all(d == truth[(k[0], first[k])] for k, d in steps.items())
    assert capture.draft_ids["recovered"] == capture.draft_ids["placeholders"] == len(rows)
    assert capture.draft_ids["duplicate_writers"] == 0 and capture.split == []
    # files: one step file per core, one draft file per core (rank 0), no name shared
    assert len(list(trace.glob("steps-*.jsonl"))) == 2
    assert len(list(trace.glob("drafts-*.jsonl"))) == 2
    runners = [json.loads(p.read_text()) for p in sorted(trace.glob("runner-*.json"))]
    states = sorted((r["ranks"]["data_index"], r["ranks"]["tp"], r["state"]) for r in runners)
    assert states == [(0, 0, "recording"), (0, 1, IDLE), (1, 0, "recording"), (1, 1, IDLE)]
    assert all(r["ranks"]["rank_source"] == "vllm.distributed.parallel_state" for r in runners)


@pytest.mark.vllm
def test_the_manifest_records_both_cores_and_every_rank(layout: dict[str, Any]) -> None:
    trace = layout["trace"]
    capture = build_capture(trace, id_map={})
    summary = capture_summary(trace, capture, capture.table())
    assert summary["state"] == "ok" and summary["engine_processes"] == 2
    cores = summary["engine_cores"]
    assert [c["data_index"] for c in cores] == [0, 1]
    drafts = sum(SpecCounters.from_json(layout["outs"][(c, 0)]["stats"]).num_drafts for c in CORES)
    assert sum(c["steps_with_drafts"] for c in cores) == drafts
    seen = parallel_seen(trace)
    assert seen["engine_cores"] == 2 and seen["data_parallel_indices"] == [0, 1]
    assert [
        (w["data_index"], w["tp"], w["state"] == "recording") for w in seen["worker_ranks"]
    ] == [
        (0, 0, True),
        (0, 1, False),
        (1, 0, True),
        (1, 1, False),
    ]
    # a dense model's cores each say data_parallel_size 1: the cores seen say 2
    engine = with_parallel_seen({"parallel": {"tensor": 2, "pipeline": 1, "data": 1}}, trace)
    assert (
        engine["parallel"]["data"] == 2 and "engine cores seen" in engine["parallel"]["data_source"]
    )


@pytest.mark.vllm
def test_a_step_recorded_by_two_ranks_or_two_cores_fails_the_capture(
    layout: dict[str, Any], tmp_path: Path
) -> None:
    trace = tmp_path / "capture"
    shutil.copytree(layout["trace"], trace)
    drafts = sorted(trace.glob("drafts-*.jsonl"))[0]
    shutil.copy(drafts, trace / "drafts-otherhost-1-abcdef.jsonl")  # a second writing rank
    capture = build_capture(trace, id_map={})
    assert capture.draft_ids["duplicate_writers"] > 0
    summary = capture_summary(trace, capture, capture.table())
    assert summary["state"] == "failed" and "two ranks" in " ".join(summary["problems"])

    (trace / "drafts-otherhost-1-abcdef.jsonl").unlink()
    steps = sorted(trace.glob("steps-*.jsonl"))[0]
    lines = steps.read_text().splitlines(keepends=True)
    (trace / "steps-otherhost-1-abcdef.jsonl").write_text(lines[-1])  # a request on two cores
    capture = build_capture(trace, id_map={})
    assert capture.split
    summary = capture_summary(trace, capture, capture.table())
    assert summary["state"] == "failed" and "two engine processes" in " ".join(summary["problems"])


def test_a_worker_whose_rank_is_unknown_records_only_if_it_is_the_only_one() -> None:
    from vllm.config import ParallelConfig

    one = ParallelConfig()
    assert single_worker({"tensor": 1, "pipeline": 1, "prefill_context": 1})
    writes, ranks = writer_ranks(one)  # no parallel state in this process
    assert writes is True and ranks["rank_source"].startswith("ParallelConfig")
    two = ParallelConfig()
    two.tensor_parallel_size = 2
    writes, ranks = writer_ranks(two)
    assert writes is None and "tensor-parallel rank is unknown" in ranks["problem"]
    assert writer_ranks(None)[0] is None


def test_untraceable_layouts_are_refused_in_one_line() -> None:
    assert options_refusal({"tensor_parallel_size": 2}) is None
    pp = options_refusal({"pipeline_parallel_size": 2})
    assert pp is not None and pp.startswith("pipeline parallelism") and "\n" not in pp
    dp = options_refusal({"data_parallel_size": 2})
    assert dp is not None and "vllm serve" in dp and "--data-parallel-size 2" in dp


def test_the_hook_refuses_pipeline_parallelism_at_the_first_step(harness: Any) -> None:
    from vllm.v1.core.sched.scheduler import Scheduler

    h = harness()
    parallel = h.sched.vllm_config.parallel_config
    parallel.pipeline_parallel_size = 2
    try:
        h.add("a-0123abcd", max_tokens=6)
        h.run(accept=lambda rid, step: 1)
    finally:
        parallel.pipeline_parallel_size = 1
    status = json.loads(next(h.trace_dir.glob("capture-*.json")).read_text())
    assert status["state"] == "refused" and status["problem"].startswith("pipeline parallelism")
    assert status["parallel"]["pipeline"] == 2
    assert not hasattr(Scheduler.update_from_output, "__tokenlens_original__")  # unpatched
    assert not list(h.trace_dir.glob("steps-*.jsonl"))  # nothing recorded
