"""A bench's output directory: its layout, resumption and the files rewritten after
every case (``bench.json``, ``results.csv``, ``results.md``, ``runs/<case>/case.json``).

A bench interrupted at case N resumes at case N: :meth:`BenchOutput.prepare` reads the
finished cases back and refuses a directory of another (or an edited) plan, or of a
newer tokenlens. Measuring a case is :mod:`tokenlens.bench.measure`'s.
"""

from __future__ import annotations

import fnmatch
import json
import platform
import shutil
from typing import Any

from tokenlens import __version__
from tokenlens.bench.config import BenchConfig
from tokenlens.bench.plan import Case, Plan
from tokenlens.bench.rows import measuring_session, with_plain, with_speedups
from tokenlens.bench_results import BENCH_JSON, RESULTS_CSV, RESULTS_MD, Row, write_results
from tokenlens.errors import TokenlensError
from tokenlens.format_version import BENCH, check_readable, stamp
from tokenlens.progress import Progress
from tokenlens.rundir import CAPTURE, now_iso, write_json_atomic
from tokenlens.signature import make_signature

CASE_JSON = "case.json"
PLAIN_JSON = "plain.json"  # the case measured again without the plugin
RUNS = "runs"


class BenchOutput:
    """State of one bench invocation: output layout, finished rows, progress."""

    def __init__(self, config: BenchConfig, plan: Plan, progress: Progress) -> None:
        self.config = config
        self.plan = plan
        self.progress = progress
        self.out = config.out
        self.rows: dict[str, Row] = {}
        # case id -> whether its measured repeats hit vLLM's prefix cache (this session)
        self.prefix_cache: dict[str, dict[str, Any]] = {}
        # case id -> the case measured again without the plugin (--compare-plain)
        self.plain: dict[str, dict[str, Any]] = {}
        self.vllm_version = "unknown"
        self.created_at = now_iso()
        # this invocation, recorded in every row it measures: rows of a resumed bench
        # measured on another host or day are told apart (rows.like_for_like)
        self.session = measuring_session(self.created_at)

    def prepare(self, vllm_version: str) -> int:
        """Create or reopen the output directory; returns how many cases are already done."""
        out = self.out
        info_path = out / BENCH_JSON
        if info_path.exists() and not self.config.restart:
            info = json.loads(info_path.read_text(encoding="utf-8"))
            check_readable(info, BENCH, info_path)
            self.created_at = info.get("created_at", self.created_at)
            if info.get("plan_sha256") != self.plan.sha256:
                raise TokenlensError(
                    f"{out} holds a bench of another plan (or an edited one): "
                    "use a new --out, or --restart to discard it"
                )
        elif out.exists() and any(out.iterdir()):
            if not self.config.restart and not info_path.exists():
                raise TokenlensError(f"{out} exists and is not a bench directory: use a new --out")
            for child in (
                out / RUNS,
                out / CAPTURE,
                out / RESULTS_CSV,
                out / RESULTS_MD,
                info_path,
            ):
                if child.is_dir():
                    shutil.rmtree(child)
                elif child.exists():
                    child.unlink()
        self.vllm_version = vllm_version
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.plan.path, out / "plan.toml")
        for case in self.plan.cases:
            row_path = out / RUNS / case.slug / CASE_JSON
            if row_path.exists():
                self.rows[case.case_id] = json.loads(row_path.read_text(encoding="utf-8"))
            plain_path = out / RUNS / case.slug / PLAIN_JSON
            if plain_path.exists():
                self.plain[case.case_id] = json.loads(plain_path.read_text(encoding="utf-8"))
        self.write_info(status="partial")
        return len(self.rows)

    def write_info(self, status: str) -> None:
        plan, vllm_version = self.plan, self.vllm_version
        fields = {
            "tokenlens": __version__,
            "vllm": vllm_version,
            "plan": plan.name,
            "plan_sha": plan.sha256[:12],
            "repeats": plan.repeats,
            "warmup": plan.warmup,
            "conc": ",".join(str(c) for c in plan.concurrencies)
            if len(plan.concurrencies) > 1
            else plan.concurrency,
            "server": "yes" if self.config.server else "no",
        }
        write_json_atomic(
            self.out / BENCH_JSON,
            {
                **stamp(BENCH),
                "signature": make_signature(fields),
                "status": status,
                "tokenlens_version": __version__,
                "vllm_version": vllm_version,
                "plan": {"name": plan.name, "description": plan.description, **plan.raw},
                "plan_path": str(plan.path),
                "plan_sha256": plan.sha256,
                "created_at": self.created_at,
                "updated_at": now_iso(),
                "argv": list(self.config.argv),
                "server": self.config.server,
                "machine": {"platform": platform.platform(), "processor": platform.processor()},
                "prefix_cache": "off for timing (enable_prefix_caching=false) unless a "
                "[[model]].engine table turns it on; each case's manifest says whether its "
                "repeats hit it (bench.prefix_cache)",
                "cases_total": len(plan.cases),
                "cases_done": len(self.rows),
            },
        )

    def pending(self) -> list[Case]:
        return [c for c in self.plan.cases if c.case_id not in self.rows]

    def finish_case(self, case: Case, row: Row) -> None:
        write_json_atomic(self.out / RUNS / case.slug / CASE_JSON, row)
        self.rows[case.case_id] = row
        self.write_info(status="partial")
        self.write_tables()

    def plain_pending(self) -> list[Case]:
        """Finished cases ``--compare-plain`` chose that have no plain measurement yet."""
        patterns = self.config.compare_plain
        return [
            c
            for c in self.plan.cases
            if c.case_id in self.rows
            and c.case_id not in self.plain
            and any(fnmatch.fnmatchcase(c.case_id, p) for p in patterns)
        ]

    def finish_plain(self, case: Case, data: dict[str, Any]) -> None:
        write_json_atomic(self.out / RUNS / case.slug / PLAIN_JSON, data)
        self.plain[case.case_id] = data
        self.write_tables()

    def ordered_rows(self) -> list[Row]:
        return with_speedups(
            [
                with_plain(self.rows[c.case_id], self.plain.get(c.case_id))
                for c in self.plan.cases
                if c.case_id in self.rows
            ]
        )

    def write_tables(self) -> None:
        from tokenlens.bench.results_md import results_markdown

        rows = self.ordered_rows()
        write_results(self.out / RESULTS_CSV, rows)
        info = json.loads((self.out / BENCH_JSON).read_text(encoding="utf-8"))
        (self.out / RESULTS_MD).write_text(results_markdown(rows, info), encoding="utf-8")
