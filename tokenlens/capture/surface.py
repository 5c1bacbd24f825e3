"""What the capture hook assumes about vLLM, checked on vLLM's source text with ``ast``.

The hook works with any vLLM whose scheduler still has the surface it touches, so it
checks that surface instead of a version list. This module reads vLLM's sources
without importing them (a wheel, an installed ``vllm/`` directory, or the running
vLLM's files) and reports each assumption as holding or broken, plus a *fingerprint*:
a hash over the code whose meaning the events depend on (the spec-decode block of
``update_from_output``, ``make_spec_decoding_stats``, ``SpecDecodingStats.observe_draft``,
the fields the hook reads). Two releases with the same fingerprint count exactly the
same way, so a release whose fingerprint was recorded after a check
(:mod:`tokenlens.capture.tiers`) is as safe as the one tested end to end.

No vLLM import here: ``scripts/check_vllm_surface.py`` runs this on a downloaded GPU
wheel on a machine without torch, and ``tokenlens doctor`` runs it before any engine.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenlens.capture.source_ast import (
    attrs_read,
    class_fields,
    dump,
    find_class,
    find_method,
    params,
    self_assigned,
    sha,
    spec_block,
    stats_calls,
)
from tokenlens.engine.vllm_source import (
    Reader,
    directory_reader,
    installed_root,
    reader_for,
    source_version,
)

# Source files the hook depends on, relative to the directory that holds ``vllm/``.
SCHEDULER = "vllm/v1/core/sched/scheduler.py"
ASYNC_SCHEDULER = "vllm/v1/core/sched/async_scheduler.py"
SCHED_OUTPUT = "vllm/v1/core/sched/output.py"
RUNNER_OUTPUT = "vllm/v1/outputs.py"
REQUEST = "vllm/v1/request.py"
SPEC_METRICS = "vllm/v1/spec_decode/metrics.py"
REQUEST_METRICS = "vllm/v1/metrics/stats.py"
OBSERVABILITY = "vllm/config/observability.py"
PARALLEL_CONFIG = "vllm/config/parallel.py"
PARALLEL_STATE = "vllm/distributed/parallel_state.py"
# What tokenlens.capture.layout reads: ParallelConfig's sizes and data-parallel index,
# and the worker's ranks from vLLM's parallel-state groups (GroupCoordinator fields).
LAYOUT_FIELDS = frozenset(
    {"tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "data_parallel_index"}
)
RANK_FUNCTIONS = ("get_tp_group", "get_pp_group")
GROUP_FIELDS = frozenset({"rank_in_group", "world_size"})

UPDATE_PARAMS = ("self", "scheduler_output", "model_runner_output")
STATS_PARAMS = (
    "self",
    "spec_decoding_stats",
    "num_draft_tokens",
    "num_accepted_tokens",
    "num_invalid_spec_tokens",
    "request_id",
)
HOOKED = ("update_from_output", "make_spec_decoding_stats")
# Fields of ModelRunnerOutput that map a request id to its row, in order of preference.
INDEX_FIELDS = ("req_id_to_index", "req_ids")


@dataclass(frozen=True)
class Assumption:
    """One thing the hook relies on, and whether this vLLM has it."""

    name: str
    holds: bool
    detail: str
    # Optional assumptions enable extras (per-request reconciliation), never refuse.
    required: bool = True


@dataclass(frozen=True)
class SurfaceReport:
    """The result of checking one vLLM's sources."""

    version: str | None
    assumptions: tuple[Assumption, ...]
    fingerprint: str | None
    parts: dict[str, str] = field(default_factory=dict)  # part -> sha256 (what changed)
    # Which ModelRunnerOutput field update_from_output indexes requests by (INDEX_FIELDS).
    request_index: str | None = None

    @property
    def ok(self) -> bool:
        return all(a.holds for a in self.assumptions if a.required)

    def holds(self, name: str) -> bool:
        return any(a.name == name and a.holds for a in self.assumptions)

    def problem(self) -> str | None:
        """One line naming every broken required assumption, or None."""
        broken = [f"{a.name} ({a.detail})" for a in self.assumptions if a.required and not a.holds]
        return "; ".join(broken) if broken else None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "ok": self.ok,
            "fingerprint": self.fingerprint,
            "request_index": self.request_index,
            "parts": self.parts,
            "assumptions": [
                {"name": a.name, "holds": a.holds, "required": a.required, "detail": a.detail}
                for a in self.assumptions
            ],
        }


def request_index(read: set[str]) -> str | None:
    """The ``ModelRunnerOutput`` field ``update_from_output`` finds a request's row by.

    ``req_id_to_index`` (a dict) up to vLLM 0.33; 0.34 dropped it and enumerates
    ``req_ids`` (the worker's batch order). The first one the method reads wins.
    """
    return next((name for name in INDEX_FIELDS if name in read), None)


# -- the check ----------------------------------------------------------------------
class _Checker:
    def __init__(self, read: Reader) -> None:
        self.read = read
        self.index: str | None = None  # which field update_from_output indexes by
        self.assumptions: list[Assumption] = []
        self.parts: dict[str, str] = {}
        self._trees: dict[str, ast.Module | None] = {}

    def tree(self, rel: str) -> ast.Module | None:
        if rel not in self._trees:
            text = self.read(rel)
            self._trees[rel] = ast.parse(text) if text is not None else None
        return self._trees[rel]

    def add(self, name: str, holds: bool, detail: str, required: bool = True) -> None:
        self.assumptions.append(Assumption(name, holds, detail, required))

    def part(self, name: str, nodes: list[ast.AST] | str) -> None:
        text = nodes if isinstance(nodes, str) else "\n".join(dump(n) for n in nodes)
        self.parts[name] = sha(text)

    def run(self) -> None:
        sched_tree = self.tree(SCHEDULER)
        sched = find_class(sched_tree, "Scheduler") if sched_tree is not None else None
        self.add(
            "Scheduler class",
            sched is not None,
            f"class Scheduler in {SCHEDULER}" if sched is not None else f"not in {SCHEDULER}",
        )
        self._signatures(sched)
        self._update_body(sched)
        self._stats_body(sched)
        self._fields(sched)
        self._async()
        self._optional()
        self._layout()

    def _signatures(self, sched: ast.ClassDef | None) -> None:
        for name, want in (
            ("update_from_output", UPDATE_PARAMS),
            ("make_spec_decoding_stats", STATS_PARAMS),
        ):
            fn = find_method(sched, name)
            got = params(fn) if fn is not None else None
            self.add(
                f"Scheduler.{name} signature",
                got == want,
                f"({', '.join(want[1:])})" if got == want else f"has {got} instead of {want}",
            )
            self.part(f"{name}.params", json.dumps(got))

    def _update_body(self, sched: ast.ClassDef | None) -> None:
        fn = find_method(sched, "update_from_output")
        if fn is None:
            self.add(
                "update_from_output calls make_spec_decoding_stats(request_id=)", False, "no method"
            )
            return
        calls = stats_calls(fn)
        keyed = [c for c in calls if any(k.arg == "request_id" for k in c.keywords)]
        self.add(
            "update_from_output calls make_spec_decoding_stats(request_id=)",
            bool(keyed),
            f"{len(keyed)} call(s) with request_id="
            if keyed
            else f"{len(calls)} call(s), none with request_id=",
        )
        read = attrs_read(fn)
        self.index = request_index(read)
        want = {"scheduled_spec_decode_tokens", "sampled_token_ids"}
        found = want <= read and self.index is not None
        missing = sorted(want - read) + ([] if self.index else [" or ".join(INDEX_FIELDS)])
        self.add(
            "update_from_output reads the drafts and the sampled tokens",
            found,
            ", ".join(sorted(want | {str(self.index)})) if found else f"missing {missing}",
        )
        block = spec_block(fn)
        self.add(
            "spec-decode block found",
            bool(block),
            f"{len(block)} statement(s)"
            if block
            else "no loop statement calls make_spec_decoding_stats",
        )
        self.part("update_from_output.spec_block", list(block))

    def _stats_body(self, sched: ast.ClassDef | None) -> None:
        fn = find_method(sched, "make_spec_decoding_stats")
        if fn is not None:
            self.part("make_spec_decoding_stats", [fn])
            read = attrs_read(fn)
            ok = "observe_draft" in read
            self.add(
                "make_spec_decoding_stats counts through observe_draft",
                ok,
                "SpecDecodingStats.observe_draft" if ok else "observe_draft not called",
            )
        tree = self.tree(SPEC_METRICS)
        stats = find_class(tree, "SpecDecodingStats") if tree is not None else None
        observe = find_method(stats, "observe_draft")
        self.add(
            "SpecDecodingStats.observe_draft",
            observe is not None,
            SPEC_METRICS if observe is not None else f"missing in {SPEC_METRICS}",
        )
        if observe is not None:
            self.part("SpecDecodingStats.observe_draft", [observe])
        self.part("SpecDecodingStats.fields", json.dumps(sorted(class_fields(stats))))

    def _fields(self, sched: ast.ClassDef | None) -> None:
        # The request index is whichever field update_from_output reads (0.34: req_ids).
        index = {self.index or INDEX_FIELDS[0]}
        checks = (
            (
                SCHED_OUTPUT,
                "SchedulerOutput",
                {"scheduled_spec_decode_tokens", "num_invalid_spec_tokens"},
            ),
            (RUNNER_OUTPUT, "ModelRunnerOutput", {"sampled_token_ids", *index}),
        )
        for rel, cls_name, want in checks:
            tree = self.tree(rel)
            have = class_fields(find_class(tree, cls_name) if tree is not None else None)
            self.add(
                f"{cls_name} fields",
                want <= have,
                ", ".join(sorted(want))
                if want <= have
                else f"missing {sorted(want - have)} in {rel}",
            )
            self.part(f"{cls_name}.fields", json.dumps(sorted(want & have)))
        tree = self.tree(REQUEST)
        init = find_method(find_class(tree, "Request") if tree is not None else None, "__init__")
        ok = "output_token_ids" in self_assigned(init)
        self.add("Request.output_token_ids", ok, REQUEST if ok else f"not assigned in {REQUEST}")
        ok = "requests" in self_assigned(find_method(sched, "__init__"))
        self.add(
            "Scheduler.requests", ok, "assigned in __init__" if ok else "not assigned in __init__"
        )

    def _async(self) -> None:
        tree = self.tree(ASYNC_SCHEDULER)
        cls = find_class(tree, "AsyncScheduler") if tree is not None else None
        if cls is None:
            self.add(
                "AsyncScheduler keeps the hooked methods", True, "no AsyncScheduler", required=False
            )
            return
        overrides = [n for n in HOOKED if find_method(cls, n) is not None]
        self.add(
            "AsyncScheduler keeps the hooked methods",
            not overrides,
            "inherits both" if not overrides else f"overrides {overrides}",
        )

    def _optional(self) -> None:
        tree = self.tree(REQUEST_METRICS)
        cls = find_class(tree, "RequestSpecDecodeMetrics") if tree is not None else None
        have = class_fields(cls)
        want = {"per_step_accepted", "per_step_drafted"}
        self.add(
            "per-request spec-decode metrics (detailed)",
            want <= have,
            "RequestSpecDecodeMetrics.per_step_accepted/drafted"
            if want <= have
            else "not in this vLLM",
            required=False,
        )
        tree = self.tree(OBSERVABILITY)
        fields = class_fields(find_class(tree, "ObservabilityConfig") if tree is not None else None)
        ok = "per_request_spec_decode_metrics" in fields
        self.add(
            "ObservabilityConfig.per_request_spec_decode_metrics",
            ok,
            "engine argument" if ok else "not in this vLLM",
            required=False,
        )

    def _layout(self) -> None:
        """What the parallel layout is read from (optional: a layout of one worker per
        engine core needs none of it; without it, several workers record no draft ids)."""
        tree = self.tree(PARALLEL_CONFIG)
        have = class_fields(find_class(tree, "ParallelConfig") if tree is not None else None)
        self.add(
            "ParallelConfig layout fields",
            have >= LAYOUT_FIELDS,
            ", ".join(sorted(LAYOUT_FIELDS))
            if have >= LAYOUT_FIELDS
            else f"missing {sorted(LAYOUT_FIELDS - have)} in {PARALLEL_CONFIG}",
            required=False,
        )
        tree = self.tree(PARALLEL_STATE)
        names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} if tree else set()
        group = class_fields(find_class(tree, "GroupCoordinator") if tree is not None else None)
        missing = sorted(set(RANK_FUNCTIONS) - names) + sorted(GROUP_FIELDS - group)
        self.add(
            "parallel-state ranks (get_tp_group, get_pp_group, GroupCoordinator.rank_in_group)",
            not missing,
            PARALLEL_STATE if not missing else f"missing {missing} in {PARALLEL_STATE}",
            required=False,
        )


def check_sources(read: Reader, version: str | None = None) -> SurfaceReport:
    """Check every assumption on the sources ``read`` returns; never imports vLLM."""
    checker = _Checker(read)
    checker.run()
    parts = dict(sorted(checker.parts.items()))
    report_ok = all(a.holds for a in checker.assumptions if a.required)
    fingerprint = sha(json.dumps(parts, sort_keys=True))[:16] if report_ok else None
    return SurfaceReport(
        version=version if version is not None else source_version(read),
        assumptions=tuple(checker.assumptions),
        fingerprint=fingerprint,
        parts=parts,
        request_index=checker.index,
    )


def check_path(path: Path) -> SurfaceReport:
    """Check a wheel or a ``vllm/`` directory (``scripts/check_vllm_surface.py``)."""
    return check_sources(reader_for(path))


def check_installed() -> SurfaceReport | None:
    """Check the vLLM installed in this environment (None if there is none)."""
    root = installed_root()
    return check_sources(directory_reader(root)) if root is not None else None


def iter_table(report: SurfaceReport) -> Iterator[tuple[str, str, str]]:
    """(assumption, holds|broken|absent, detail) rows for a table."""
    for a in report.assumptions:
        state = "holds" if a.holds else ("broken" if a.required else "absent")
        yield a.name, state, a.detail
