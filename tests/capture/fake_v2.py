"""Model Runner V2's side without a GPU: vLLM's real ``GPUModelRunner`` class with the
draft-id hook around a stand-in ``prepare_inputs`` that returns a real ``InputBatch`` and
keeps V2's request state (a ``draft_tokens`` row per request, ``prompt_len``,
``total_len``) in torch tensors; :func:`drive` runs it beside the real scheduler of
``tokenlens.testing.scheduler``. Shared by test_runner_drafts.py and the parallel tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from tokenlens.capture import runner_drafts

K = 3  # the harness's num_speculative_tokens (tokenlens/testing/scheduler.py)
MAX_REQS = 16


class V2:
    """The runner side: vLLM's GPUModelRunner class with the hook, V2's request state."""

    def __init__(self, trace_dir: Path, parallel_config: Any = None) -> None:
        """``parallel_config``: the runner's ``ParallelConfig`` (default: vLLM's, one worker)."""
        from vllm.config import ParallelConfig
        from vllm.v1.worker.gpu.input_batch import InputBatch
        from vllm.v1.worker.gpu.model_runner import GPUModelRunner

        self.hook = runner_drafts.RunnerHook(trace_dir)
        self.batch_cls = InputBatch
        v2 = self

        class Runner(GPUModelRunner):  # type: ignore[misc]
            def __init__(self) -> None:  # no device: only the state the hook reads
                self.parallel_config = parallel_config or ParallelConfig()
                self.req_states = SimpleNamespace(
                    draft_tokens=torch.zeros((MAX_REQS, K), dtype=torch.int64),
                    prompt_len=SimpleNamespace(np=np.zeros(MAX_REQS, dtype=np.int32)),
                    total_len=SimpleNamespace(gpu=torch.zeros(MAX_REQS, dtype=torch.int32)),
                )

            def prepare_inputs(self, scheduler_output: Any, *args: Any) -> Any:
                return v2.batch(scheduler_output)

        Runner.prepare_inputs = self.hook.wrap(Runner.__dict__["prepare_inputs"])
        self.runner = Runner()
        self.slot: dict[str, int] = {}
        self.tokens: dict[str, list[int]] = {}  # prompt + everything sampled (the device's truth)
        self.proposed: list[tuple[str, int, list[int]]] = []  # (engine id, b, drafts verified)
        self.counter = 0

    def add(self, req_id: str, prompt: list[int]) -> None:
        self.slot[req_id] = len(self.slot)
        self.tokens[req_id] = list(prompt)
        self.runner.req_states.prompt_len.np[self.slot[req_id]] = len(prompt)

    def batch(self, out: Any) -> Any:
        states = self.runner.req_states
        ids = list(out.num_scheduled_tokens)
        idx = np.array([self.slot[r] for r in ids], dtype=np.int32)
        for r in ids:
            states.total_len.gpu[self.slot[r]] = len(self.tokens[r])
        counts = np.array(
            [len(out.scheduled_spec_decode_tokens.get(r, ())) for r in ids], dtype=np.int32
        )
        blank = {f.name: None for f in dataclasses.fields(self.batch_cls)}
        return self.batch_cls(
            **{
                **blank,
                "req_ids": ids,
                "num_reqs": len(ids),
                "idx_mapping": torch.from_numpy(idx),
                "idx_mapping_np": idx,
                "num_draft_tokens_per_req": counts if counts.any() else None,
            }
        )

    def step(
        self, out: Any, sched: Any, accept: Callable[[str, int], int], step: int
    ) -> dict[str, list[int]]:
        """Verify the device rows, sample, propose the next drafts (as V2 does)."""
        self.runner.prepare_inputs(out, None)
        states = self.runner.req_states
        prompt_len = states.prompt_len.np
        sampled = {}
        for rid in out.num_scheduled_tokens:
            if sched.requests[rid].is_prefill_chunk:
                continue
            n = len(out.scheduled_spec_decode_tokens.get(rid, ()))
            row = states.draft_tokens[self.slot[rid]].tolist()[:n]
            if n:
                b = len(self.tokens[rid]) - int(prompt_len[self.slot[rid]])
                self.proposed.append((rid, b, row))
            m = min(accept(rid, step), n)
            self.counter += 1
            sampled[rid] = [*row[:m], 300 + self.counter % 50]
            self.tokens[rid].extend(sampled[rid])
            states.draft_tokens[self.slot[rid]] = torch.tensor(
                [600 + (self.counter * K + j) % 97 for j in range(K)]
            )
        return sampled


def drive(h: Any, v2: V2, accept: Callable[[str, int], int], async_: bool) -> None:
    """schedule -> runner (hook) -> scheduler, until every request finishes."""
    for step in range(200):
        if not h.sched.has_requests():
            v2.hook.recorder.close()  # drained and written
            return
        out = h.schedule()
        sampled = v2.step(out, h.sched, accept, step)
        h.finish(out, sampled)
        if not async_:  # V2's DraftTokensHandler without structured outputs
            running = [r for r in out.num_scheduled_tokens if r in h.sched.requests]
            h.propose({r: [-1] * K for r in running})
    raise AssertionError("requests did not finish")
