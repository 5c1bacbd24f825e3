"""V2 n-gram filler drafts: the CPU rule, vLLM's own kernel, and the events' column."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest

from tokenlens.capture.events import EVENTS_SCHEMA
from tokenlens.capture.filler import NGRAM_GPU_RULE, mark_fillers, ngram_gpu_slots
from tokenlens.capture.reconcile import counters_from_events

_KERNEL_SCRIPT = r"""
import ast, json, sys
import torch, triton, triton.language as tl
import vllm.v1.worker.gpu.spec_decode.ngram.speculator as module

namespace = {"triton": triton, "tl": tl, "torch": torch}
for node in ast.parse(open(module.__file__, encoding="utf-8").read()).body:
    if isinstance(node, ast.FunctionDef) and node.name.startswith("_ngram_"):
        # The interpreter wants boolean masks typed as such (the GPU compiler does not).
        exec(ast.unparse(node).replace("mask=slot_valid,", "mask=slot_valid != 0,"), namespace)
out = []
for context, min_n, max_n, k in json.loads(sys.stdin.read()):
    big_l = 64
    tokens = torch.zeros((1, big_l), dtype=torch.int32)
    tokens[0, : len(context)] = torch.tensor(context, dtype=torch.int32)
    idx = torch.zeros(1, dtype=torch.int64)
    total = torch.tensor([len(context)], dtype=torch.int32)
    sampled = torch.ones(1, dtype=torch.int32)
    blocks = triton.cdiv(big_l, 64)
    scratch = torch.zeros((1, blocks), dtype=torch.int64)
    drafts = torch.zeros((1, k), dtype=torch.int64)
    last = torch.tensor([context[-1]], dtype=torch.int64)
    namespace["_ngram_scan_kernel"][(1, blocks)](
        tokens, tokens.stride(0), idx, total, sampled, scratch, scratch.stride(0), big_l,
        min_n, max_n, max(1, triton.next_power_of_2(max_n)), 64)
    namespace["_ngram_finalize_kernel"][(1,)](
        tokens, tokens.stride(0), idx, total, sampled, last, scratch, scratch.stride(0),
        drafts, big_l, blocks, k, max(1, triton.next_power_of_2(k)),
        max(1, triton.next_power_of_2(blocks)))
    out.append([int(x) for x in drafts[0].tolist()])
print(json.dumps(out))
"""


def kernel_drafts(cases: list[tuple[list[int], int, int, int]]) -> list[list[int]]:
    """V2's n-gram proposals, by vLLM's own Triton kernels run in Triton's interpreter
    (a child process: ``TRITON_INTERPRET`` must be set before triton is imported)."""
    pytest.importorskip("triton")
    pytest.importorskip("vllm.v1.worker.gpu.spec_decode.ngram.speculator")
    done = subprocess.run(
        [sys.executable, "-c", _KERNEL_SCRIPT],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env={**os.environ, "TRITON_INTERPRET": "1"},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: list[list[int]] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def rule_drafts(context: list[int], min_n: int, max_n: int, k: int) -> list[int]:
    valid, start = ngram_gpu_slots(context, min_n, max_n, k)
    return [context[start + j] if j < valid else context[-1] for j in range(k)]


CASES = [
    ([1, 2, 3, 4, 1, 2, 3, 4, 1, 2], 1, 4, 3),  # a full match
    ([5, 6, 7, 8, 9], 1, 4, 3),  # no match: every slot repeats the last token
    ([1, 2, 3, 1, 2], 1, 4, 5),  # a match near the end: two valid slots, then fillers
    ([3, 3], 1, 4, 3),  # a one-token context match
    ([9], 1, 1, 2),  # too short for min_n's match
    ([4, 5, 4, 5, 4], 2, 2, 3),
]


@pytest.mark.vllm
def test_the_rule_equals_vllms_kernel() -> None:
    """By hand-picked cases and 40 random ones (small alphabets: many matches)."""
    rng = random.Random(7)
    cases = list(CASES)
    for _ in range(40):
        context = [rng.randrange(4) for _ in range(rng.randrange(1, 40))]
        min_n = rng.randrange(1, 3)
        cases.append((context, min_n, rng.randrange(min_n, 5), rng.randrange(1, 6)))
    kernel = kernel_drafts(cases)
    for case, expected in zip(cases, kernel, strict=True):
        assert rule_drafts(*case) == expected, case


def test_slots_by_hand() -> None:
    assert ngram_gpu_slots([1, 2, 3, 1, 2], 1, 4, 5) == (3, 2)  # "1 2" at 0: copy 3 1 2
    assert ngram_gpu_slots([5, 6, 7], 1, 4, 3) == (0, 0)
    assert ngram_gpu_slots([7, 1, 7, 2, 7], 1, 1, 3) == (2, 3)  # rightmost "7" before the end


RULE = {"rule": NGRAM_GPU_RULE, "min_n": 1, "max_n": 4, "k": 3, "max_model_len": 64}


def _events(rows: list[tuple[Any, ...]]) -> pa.Table:
    names = EVENTS_SCHEMA.names
    return pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)}, schema=EVENTS_SCHEMA)


def _requests(prompt: list[int], output: list[int]) -> pa.Table:
    return pa.table(
        {
            "request_id": ["a"],
            "prompt_token_ids": [prompt],
            "output_token_ids": [output],
        }
    )


def test_fillers_are_marked_and_reconcile_unchanged() -> None:
    # Prompt 5 1 2, output 1 ...: the step at b=1 has context 5 1 2 1; "1" last occurs
    # at 1, so the drafts copy 2 1 (two valid slots) and the third repeats the last 1.
    prompt, output = [5, 1, 2], [1, 2, 1, 9, 9]
    events = _events(
        [
            ("a", 0, 0, 2, True, 2, 1),
            ("a", 0, 1, 1, True, 1, 2),
            ("a", 0, 2, 1, False, 9, 3),  # the filler
        ]
    )
    marked, stats = mark_fillers(events, _requests(prompt, output), RULE)
    assert marked.column("filler").to_pylist() == [False, False, True]
    assert stats is not None
    assert stats["count"] == 1 and stats["accepted"] == 0 and stats["mismatches"] == 0
    assert counters_from_events(marked) == counters_from_events(events)


def test_ids_that_contradict_the_rule_leave_filler_unknown() -> None:
    prompt, output = [5, 1, 2], [1, 2, 1, 9, 9]
    events = _events(
        [
            ("a", 0, 0, 2, True, 2, 1),
            ("a", 0, 1, 1, True, 1, 2),
            ("a", 0, 2, 7, False, 9, 3),  # not the last token: the rule does not hold
        ]
    )
    marked, stats = mark_fillers(events, _requests(prompt, output), RULE)
    assert marked.column("filler").null_count == 3
    assert stats is not None and stats["mismatches"] == 1 and "contradict" in stats["problem"]


def test_no_rule_no_column() -> None:
    events = _events([("a", 0, 0, 3, True, 3, 1)])
    marked, stats = mark_fillers(events, _requests([1], [3]), None)
    assert stats is None and "filler" not in marked.column_names
