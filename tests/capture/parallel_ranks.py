"""One worker of a tensor- and data-parallel engine, in its own process (spawned by
test_parallel_capture.py): vLLM's real parallel state over gloo, vLLM's real scheduler,
the Model Runner V2 stand-in of fake_v2.py.

The layout is vLLM's (tokenlens/capture/layout.py): engine core ``core`` has two
tensor-parallel workers; rank 0 is also the engine core process (the one scheduler, the
scheduler hook installed), rank 1 runs the same deterministic scheduler unhooked as a
stand-in for the scheduler output vLLM broadcasts to every worker. Both ranks run the
draft-id hook, as every vLLM worker does; which of them records is the hook's decision.
Like a dense model's cores, each core is an independent engine (``data_parallel_size``
1) that keeps its ``data_parallel_index``.
"""

from __future__ import annotations

import json
from pathlib import Path


def engine_rank(core: int, rank: int, port: int, trace_dir: str, model_dir: str, out: str) -> None:
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state

    from tests.capture.fake_v2 import V2, K, drive
    from tokenlens.capture import plugin
    from tokenlens.testing.scheduler import Harness, make_scheduler, tiny_vllm_config

    config = tiny_vllm_config(Path(f"{model_dir}-{core}-{rank}"))
    parallel = config.parallel_config
    parallel.tensor_parallel_size = 2
    parallel.data_parallel_index = core
    with set_current_vllm_config(config):
        parallel_state.init_distributed_environment(
            world_size=2,
            rank=rank,
            distributed_init_method=f"tcp://127.0.0.1:{port}",
            local_rank=rank,
            backend="gloo",
        )
        parallel_state.ensure_model_parallel_initialized(2, 1)
    if rank == 0:
        assert plugin.install(trace_dir) is None
    h = Harness(make_scheduler(config), Path(trace_dir))
    v2 = V2(Path(trace_dir), parallel)
    reqs = {}
    for i in range(3):
        rid = f"c{core}r{i}-{core:04x}abcd"
        prompt = [200 + 10 * core + i] * (20 + i)
        reqs[rid.split("-")[0]] = h.add(rid, prompt=prompt, max_tokens=12 + i + 2 * core)
        v2.add(rid, prompt)
    drive(h, v2, lambda rid, step: (step + int(rid[3]) + core) % (K + 1), async_=False)
    if rank == 0:
        plugin.flush()
        plugin.uninstall()
    result = {
        "stats": h.stats.to_json(),
        "per_request": {rid: r.spec_decode_metrics.to_dict() for rid, r in reqs.items()},
        "proposed": v2.proposed,
    }
    Path(out).write_text(json.dumps(result), encoding="utf-8")
    parallel_state.destroy_model_parallel()
    parallel_state.destroy_distributed_environment()
