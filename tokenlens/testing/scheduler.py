"""A real vLLM scheduler without a model: the scheduler-level tests' harness and benchmark's.

Built the way vLLM's own ``tests/v1/core`` tests build theirs: a ``VllmConfig`` from a
local ``config.json`` (no weights, no tokenizer), a hand-sized KV cache, and
``ModelRunnerOutput``s written by hand in place of the model. The tokenlens hook is
installed on the real ``Scheduler`` class, so every step runs vLLM's own
``schedule()`` / ``update_from_output()`` and the plugin exactly as in an engine.

Used by ``tests/capture`` (the behaviour the plugin relies on, release by release) and
by ``benchmarks/bench_hook_step.py`` (the hook's cost per step at realistic batch sizes:
the scheduler's own work is real, only the model is missing). vLLM is imported inside
the functions: importing this module needs no vLLM.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenlens.capture.events import Capture, build_capture
from tokenlens.engine.results import SpecCounters

K = 3  # drafts per step in every scheduler test
BLOCK = 16
EOS = 2
# A tiny Qwen2 config: ModelConfig reads it; nothing is ever loaded.
TINY_CONFIG = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "vocab_size": 1000,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 1,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "bos_token_id": 1,
    "eos_token_id": EOS,
    "torch_dtype": "float32",
}


# Set by tests/capture/test_scheduler_releases.py when it runs this suite against another
# vLLM release's unpacked sources (its wheel without the compiled parts).
SOURCE_TREE_ENV = "TOKENLENS_VLLM_SOURCE_TREE"


def _scheduler_only_platform() -> None:
    """Let a vLLM source tree without its compiled parts build a config for the scheduler.

    vLLM's platform hook (``check_and_update_config``) prepares kernels and refuses a
    machine without them (0.34's CPU platform: "requires Triton"); the scheduler, the
    only class these tests run, never reads what it would set. Only under
    ``SOURCE_TREE_ENV``: with the installed vLLM, its platform runs as in an engine.
    """
    from vllm.platforms import current_platform

    setattr(  # noqa: B010
        type(current_platform), "check_and_update_config", classmethod(lambda cls, config: None)
    )


def tiny_vllm_config(
    directory: Path, max_num_seqs: int = 16, max_num_batched_tokens: int = 1024
) -> Any:
    """One ``VllmConfig`` (n-gram k=3, prefix caching, per-request metrics ``detailed``).

    ``directory`` receives the tiny model's ``config.json`` (nothing is ever loaded).
    """
    from vllm.config import (
        CacheConfig,
        ModelConfig,
        ObservabilityConfig,
        SchedulerConfig,
        SpeculativeConfig,
        VllmConfig,
    )

    if os.environ.get(SOURCE_TREE_ENV):
        _scheduler_only_platform()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(TINY_CONFIG), encoding="utf-8")
    return VllmConfig(
        model_config=ModelConfig(
            model=str(directory), skip_tokenizer_init=True, dtype="float32", max_model_len=1024
        ),
        scheduler_config=SchedulerConfig(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=1024,
            enable_chunked_prefill=True,
            is_encoder_decoder=False,
        ),
        cache_config=CacheConfig(block_size=BLOCK, enable_prefix_caching=True),
        speculative_config=SpeculativeConfig(
            method="ngram", num_speculative_tokens=K, prompt_lookup_max=4, prompt_lookup_min=1
        ),
        observability_config=ObservabilityConfig(per_request_spec_decode_metrics="detailed"),
    )


def make_scheduler(vllm_config: Any, num_blocks: int = 200, async_: bool = False) -> Any:
    """vLLM's own ``Scheduler`` (or ``AsyncScheduler``) over a hand-sized KV cache."""
    import torch
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    vllm_config.cache_config.num_gpu_blocks = num_blocks
    kv = KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[
            KVCacheGroupSpec(
                ["layer"],
                FullAttentionSpec(
                    block_size=BLOCK, num_kv_heads=1, head_size=1, dtype=torch.float32
                ),
            )
        ],
    )
    cls = AsyncScheduler if async_ else Scheduler
    return cls(
        vllm_config=vllm_config,
        kv_cache_config=kv,
        structured_output_manager=StructuredOutputManager(vllm_config),
        block_size=BLOCK,
        log_stats=True,
    )


def runner_output(ids: list[str], sampled: dict[str, list[int]]) -> Any:
    """The ``ModelRunnerOutput`` of a step whose rows are ``ids``, in the running vLLM's shape
    (``req_id_to_index`` beside ``req_ids`` up to 0.33, ``req_ids`` alone from 0.34)."""
    from vllm.v1.outputs import ModelRunnerOutput

    output: dict[str, Any] = {
        "req_ids": ids,
        "sampled_token_ids": [sampled.get(rid, []) for rid in ids],
    }
    if "req_id_to_index" in {f.name for f in dataclasses.fields(ModelRunnerOutput)}:
        output["req_id_to_index"] = {rid: i for i, rid in enumerate(ids)}
    return ModelRunnerOutput(**output)


@dataclass
class Harness:
    """One scheduler, the hook recording into ``trace_dir``, and vLLM's own stats."""

    sched: Any
    trace_dir: Path
    stats: SpecCounters = field(default_factory=SpecCounters)
    steps: list[Any] = field(default_factory=list)  # SchedulerOutputs, in order
    preempted: set[str] = field(default_factory=set)
    # vLLM's SpecDecodingStats.num_draft_tokens_per_pos, summed (not an exported counter)
    drafted_per_position: list[int] = field(default_factory=list)
    reverse_batch: bool = False
    counter: int = 0  # the made-up model's sample counter
    stale: set[str] = field(default_factory=set)  # requests that got a stale output

    def add(
        self,
        req_id: str,
        prompt: list[int] | None = None,
        max_tokens: int = 32,
        stop: list[int] | None = None,
    ) -> Any:
        from vllm.sampling_params import SamplingParams
        from vllm.utils.hashing import get_hash_fn_by_name
        from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
        from vllm.v1.request import Request

        hash_fn = get_hash_fn_by_name("sha256")
        init_none_hash(hash_fn)
        request = Request(
            req_id,
            prompt if prompt is not None else list(range(100, 120)),
            SamplingParams(max_tokens=max_tokens, stop_token_ids=stop or []),
            None,
            block_hasher=get_request_block_hasher(BLOCK, hash_fn),
        )
        self.sched.add_request(request)
        return request

    def schedule(self) -> Any:
        out = self.sched.schedule()
        self.steps.append(out)
        self.preempted |= set(out.preempted_req_ids or ())
        return out

    def finish(self, out: Any, sampled: dict[str, list[int]]) -> Any:
        """Hand vLLM the "model's" output for a scheduled step; collect its stats."""
        ids = list(out.num_scheduled_tokens)
        if self.reverse_batch:  # the worker's batch order need not be the schedule's
            ids.reverse()
        unknown = set(sampled) - set(ids)
        assert not unknown, f"not scheduled this step: {unknown}"
        result = self.sched.update_from_output(out, runner_output(ids, sampled))
        for eco in result.values():
            stats = eco.scheduler_stats.spec_decoding_stats if eco.scheduler_stats else None
            if stats is not None:
                self.stats = self.stats + SpecCounters(
                    stats.num_drafts,
                    stats.num_draft_tokens,
                    stats.num_accepted_tokens,
                    tuple(stats.num_accepted_tokens_per_pos),
                )
                drafted = list(stats.num_draft_tokens_per_pos)
                width = max(len(drafted), len(self.drafted_per_position))
                self.drafted_per_position = [
                    a + b
                    for a, b in zip(
                        drafted + [0] * (width - len(drafted)),
                        self.drafted_per_position + [0] * (width - len(self.drafted_per_position)),
                        strict=True,
                    )
                ]
        return result

    def propose(self, drafts: dict[str, list[int]]) -> None:
        """What the drafter proposes after a step (synchronous scheduling only)."""
        from vllm.v1.outputs import DraftTokenIds

        self.sched.update_draft_token_ids(DraftTokenIds(list(drafts), list(drafts.values())))

    def step(
        self, sampled: dict[str, list[int]], drafts: dict[str, list[int]] | None = None
    ) -> Any:
        """schedule -> the given output -> (sync) the next drafts; returns the schedule."""
        out = self.schedule()
        self.finish(out, sampled)
        if drafts:
            self.propose(drafts)
        return out

    def model(self, out: Any, accept: Callable[[str, int], int], step: int) -> dict[str, list[int]]:
        """What a made-up model samples for a scheduled step (read when it is scheduled).

        ``accept(req_id, step)`` says how many drafts the "target" accepts; an accepted
        placeholder draft (-1) stands for a real token, 500 + position. Prefill chunks
        sample nothing; every other row samples its accepted drafts plus one token.
        """
        sampled = {}
        for rid in out.num_scheduled_tokens:
            if self.sched.requests[rid].is_prefill_chunk:
                continue
            scheduled = list(out.scheduled_spec_decode_tokens.get(rid, ()))
            m = min(accept(rid, step), len(scheduled))
            self.counter += 1
            tokens = [t if t >= 0 else 500 + i for i, t in enumerate(scheduled[:m])]
            sampled[rid] = [*tokens, 300 + self.counter % 50]
        return sampled

    def run(
        self,
        accept: Callable[[str, int], int],
        drafts: bool = True,
        max_steps: int = 200,
        overlap: bool = False,
        steps: int | None = None,
    ) -> None:
        """Step with a made-up model (:meth:`model`) until every request finishes.

        ``overlap``: schedule step N+1 before step N's output arrives, as vLLM's engine
        core does under async scheduling, so that a preemption can catch a step in
        flight (its output then arrives stale). ``steps``: stop after that many steps
        instead of when every request finished.
        """
        in_flight: list[tuple[Any, dict[str, list[int]]]] = []
        for step in range(max_steps):
            if steps is not None and step >= steps and not in_flight:
                return
            if not self.sched.has_requests() and not in_flight:
                return
            if self.sched.has_requests() and (steps is None or step < steps):
                out = self.schedule()
                in_flight.append((out, self.model(out, accept, step)))
            if not in_flight:
                continue
            if len(in_flight) < (2 if overlap else 1) and self.sched.has_requests():
                continue
            out, sampled = in_flight.pop(0)
            self.stale |= {
                rid
                for rid in out.num_scheduled_tokens
                if rid in self.sched.requests
                and getattr(self.sched.requests[rid], "num_stale_output_tokens", 0) > 0
            }
            self.finish(out, sampled)
            if drafts:
                running = [r for r in out.num_scheduled_tokens if r in self.sched.requests]
                self.propose({r: [10 + i for i in range(K)] for r in running})
        raise AssertionError("requests did not finish")

    def capture(self, id_map: dict[str, str] | None = None) -> Capture:
        """Everything the hook recorded so far (engine ids lose vLLM's suffix)."""
        from tokenlens.capture import plugin

        plugin.flush()
        return build_capture(self.trace_dir, id_map=id_map or {})
