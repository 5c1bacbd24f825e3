"""Analyze throughput on >= 1M simulated draft events (not a test).

Writes the two runs of a simulated study (n-gram and a trained drafter on the same
Japanese/English prompt pairs, real Qwen2.5 text, top-5 logprobs; the ``h1_h2``
scenario of :mod:`tokenlens.testing`) with at least the asked number of events (1M by
default, at most about 2% more; not timed), then runs the whole of ``tokenlens
analyze`` on them in a child process (read, classify with the tokenizer and MeCab,
join, 1000 bootstrap replicates for every table, decompositions, logistic regression,
verdicts, write tokens.parquet / summary.json / tables.md) and prints its wall time,
the child's peak resident memory and CPU time, and the machine's load average (on a
shared machine, wall time over CPU time says how loaded it was). The join runs in
forked worker processes (``--jobs``, default one per core), and the figures' gap and
rejection sections in one more: their CPU time is added to the child's, the largest
one's peak RSS is printed beside the child's (a forked process's RSS counts the pages
it shares with the child), and the peak of the whole tree's proportional set size,
sampled every second, says what they hold together. ``--keep-study DIR`` keeps the
simulated runs, ``--study DIR`` analyses them again (versions compared on one study).
``--request-figures`` then times the fleet path on the analysis' tokens.parquet:
``request-stats`` (DuckDB, by script) and ``request-figures`` in a process of their
own, with its peak RSS, and checks its figures against summary.json's.

Run: ``PYTHONPATH=. python benchmarks/bench_analyze.py [--events 1000000] [--bootstrap 1000]``.
The goal (issue 35) is <= 30 s at 1M events and <= 5 min at 10M on the 2-core
development machine; docs/analysis.md has the measured figures.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq

from tokenlens.analysis.request_stats import BY as BY_ALL
from tokenlens.testing import SCENARIOS, simulate_study, write_study

CALIBRATION_PAIRS = 200  # a small study of the same scenario measures events per pair


def _pairs_for(events: int, seed: int) -> int:
    """Prompt pairs whose study has about ``events`` events (the scenario's own rate,
    measured on a small study: about 620 per pair, both runs and both languages)."""
    small = simulate_study(SCENARIOS["h1_h2"], CALIBRATION_PAIRS, seed=seed)
    per_pair = sum(len(r.events) for r in small.runs) / CALIBRATION_PAIRS
    return max(1, round(events / per_pair))


def _write_runs(root: Path, events: int, seed: int) -> list[Path]:
    pairs = _pairs_for(events, seed)
    study = simulate_study(SCENARIOS["h1_h2"], pairs, seed=seed)
    while sum(len(r.events) for r in study.runs) < events:  # a short study: 1% more pairs
        pairs = int(pairs * 1.01) + 1
        study = simulate_study(SCENARIOS["h1_h2"], pairs, seed=seed)
    paths = write_study(study, root)
    for run in study.runs:
        print(f"  {run.spec.label}: {len(run.events):,} events, {2 * pairs} requests", flush=True)
    return paths


def _counts_child(analysis: str, n_boot: int, step: str, memory: str | None) -> None:
    """One step of the fleet path on an analysis' tokens.parquet, in this process:
    ``stats``, ``request-stats --by all`` (DuckDB) writing its tables into ``counts/``
    beside it; ``figures``, ``request-figures`` of that directory, compared with
    summary.json (``request_tables.differences``). Prints the wall time, the peak RSS,
    the tables' rows and the paths of summary.json where the figures differ (``-``:
    none)."""
    import json

    from tokenlens.analysis.request_figures import FiguresConfig, write_figures
    from tokenlens.analysis.request_stats import StatsConfig, request_stats_all
    from tokenlens.analysis.request_tables import differences

    out = Path(analysis)
    counts, written = out / "counts", out / "request-figures.json"
    start = time.perf_counter()
    rows, differ = 0, ["-"]
    if step == "stats":
        config = StatsConfig(str(out / "tokens.parquet"), str(counts), by="all", memory=memory)
        rows = sum(n for n in request_stats_all(config).values() if n is not None)
    else:
        got = write_figures(counts, written, FiguresConfig(n_boot=n_boot))
        differ = differences(got, json.loads((out / "summary.json").read_text("utf-8"))) or ["-"]
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{wall:.3f} {peak} {rows} {','.join(differ)}")


def _analyze_child(paths: list[str], out: str, n_boot: int, jobs: int | None) -> None:
    from tokenlens.analysis import AnalyzeConfig, run_analyze

    start = time.perf_counter()
    runs = tuple(Path(p) for p in paths)
    config = AnalyzeConfig(runs=runs, out=Path(out), n_boot=n_boot, jobs=jobs)
    run_analyze(config, progress=StageLog())
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_SELF)  # this process: analyze
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)  # its forked processes, reaped
    cpu = usage.ru_utime + usage.ru_stime + workers.ru_utime + workers.ru_stime
    print(f"{wall:.3f} {usage.ru_maxrss} {cpu:.3f} {workers.ru_maxrss}")


class StageLog:
    """analyze's progress as ``STAGE <unix time> <what>`` lines on stderr: when each
    stage began (and each run was joined), for the memory per stage."""

    def __init__(self) -> None:
        self.runs = 0
        self.total = 0
        self._say("check inputs")

    def _say(self, what: str) -> None:
        print(f"STAGE {time.time():.3f} {what}", file=sys.stderr, flush=True)

    def stage(self, name: str, total: float | None = None, unit: str = "it") -> None:
        if unit == "run":
            self.total = int(total or 0)
        self._say(f"{name} (run 1)" if unit == "run" else name)

    def advance(self, amount: float = 1) -> None:
        self.runs += 1  # the next run's join begins, or after the last, the assembly
        more = self.runs < self.total
        self._say(f"read and classify runs (run {self.runs + 1})" if more else "assemble")

    def note(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass


def _per_stage(stderr: str, samples: list[tuple[float, int]], end: float) -> list[str]:
    """Per stage of ``STAGE`` lines: its seconds and the peak of the samples in it."""
    marks = []
    for line in stderr.splitlines():
        if line.startswith("STAGE "):
            _, when, what = line.split(" ", 2)
            marks.append((float(when), what))
    rows = []
    for (start, what), (stop, _) in zip(marks, [*marks[1:], (end, "")], strict=True):
        if stop - start < 0.05:  # the moment between the last run's join and the figures
            continue
        inside = [kib for t, kib in samples if start <= t < stop]
        peak = f"{max(inside) / 1024:.0f} MiB" if inside else "no sample"
        rows.append(f"  {what}: {stop - start:.1f} s, peak PSS {peak}")
    return rows


class TreeMemory(threading.Thread):
    """Samples the proportional set size (PSS: each shared page split among the
    processes that map it) of a process and its descendants, and keeps the peak of
    their sum: the memory of analyze with its forked join workers, shared pages counted
    once. Linux only (``/proc/PID/smaps_rollup``); elsewhere it takes no sample."""

    every = 1.0

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kib = 0
        self.samples = 0
        self.timeline: list[tuple[float, int]] = []  # (unix time, KiB)
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(self.every):
            total = sum(_pss_kib(p) for p in _tree(self.pid))
            if total:
                self.samples += 1
                self.peak_kib = max(self.peak_kib, total)
                self.timeline.append((time.time(), total))

    def stop(self) -> None:
        self._done.set()
        self.join()


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (``/proc/PID/task/*/children``)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                todo.extend(int(c) for c in task.read_text().split())
            except OSError:
                continue
    return out


def _pss_kib(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:  # gone, or not Linux
        return 0
    return next((int(x.split()[1]) for x in text.splitlines() if x.startswith("Pss:")), 0)


def _load() -> str:
    """The 1-, 5- and 15-minute load averages."""
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=None, help="join processes (analyze --jobs)")
    parser.add_argument(
        "--study",
        type=Path,
        help="analyse the runs already in this directory (written by an earlier "
        "--keep-study) instead of simulating a study: versions compared on the same events",
    )
    parser.add_argument(
        "--keep-study", type=Path, help="write the simulated study here and keep it"
    )
    parser.add_argument(
        "--request-figures",
        action="store_true",
        help="then count the analysis' rows per request with request-stats --by all "
        "(DuckDB: a table per class column) and compute the figures from the counts "
        "(request-figures of that directory): time, peak memory, and whether every "
        "figure equals summary.json's",
    )
    parser.add_argument(
        "--analysis",
        type=Path,
        metavar="DIR",
        help="measure only the fleet path (--request-figures) on this analyze output, "
        "made with the same --bootstrap (its files are read, nothing is written there)",
    )
    parser.add_argument(
        "--memory",
        metavar="SIZE",
        help="request-stats' DuckDB memory limit (e.g. 500MB; default: DuckDB's own)",
    )
    parser.add_argument("--counts-child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--write", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.counts_child:
        analysis, step = args.counts_child
        _counts_child(analysis, args.bootstrap, step, args.memory)
        return
    if args.child:
        *paths, out = args.child
        _analyze_child(paths, out, args.bootstrap, args.jobs)
        return
    if args.analysis:  # the fleet path alone, on an analysis already made
        copy = Path(tempfile.mkdtemp(prefix="tokenlens-counts-"))
        for name in ("tokens.parquet", "summary.json"):
            (copy / name).symlink_to((args.analysis / name).resolve())
        events = pq.ParquetFile(args.analysis / "tokens.parquet").metadata.num_rows
        try:
            _measure_counts(copy, args.bootstrap, events, args.memory)
        finally:
            shutil.rmtree(copy)
        return
    if args.write:
        for path in _write_runs(args.write, args.events, seed=0):
            print(f"PATH {path}", flush=True)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if args.study:
            paths = [str(p) for p in sorted(args.study.iterdir()) if (p / "manifest.json").exists()]
            print(f"the study in {args.study}: {len(paths)} runs", flush=True)
        else:
            study = args.keep_study or root
            print(f"simulating >= {args.events:,} events ...", flush=True)
            # in a process of its own: the simulated study's memory is gone before analyze
            write = [sys.executable, __file__, "--events", str(args.events), "--write", str(study)]
            lines = subprocess.run(write, check=True, capture_output=True, text=True).stdout
            print("\n".join(x for x in lines.splitlines() if not x.startswith("PATH ")))
            paths = [x.removeprefix("PATH ") for x in lines.splitlines() if x.startswith("PATH ")]
        cmd = [
            sys.executable,
            __file__,
            "--bootstrap",
            str(args.bootstrap),
            *(["--jobs", str(args.jobs)] if args.jobs else []),
            "--child",
            *map(str, paths),
            str(root / "out"),
        ]
        load_before = _load()
        wall = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        tree = TreeMemory(child.pid)
        tree.start()
        stdout, stderr = child.communicate()
        tree.stop()
        wall = time.perf_counter() - wall
        if child.returncode:
            sys.exit(f"analyze failed ({child.returncode}): {stderr.strip()[-2000:]}")
        done = subprocess.CompletedProcess(cmd, child.returncode, stdout, stderr)
        inside, maxrss_kib, cpu, worker_kib = (float(x) for x in done.stdout.split()[-4:])
        peak_mib = maxrss_kib / 1024
        tokens = root / "out" / "tokens.parquet"
        size = tokens.stat().st_size / 2**20
        events = pq.ParquetFile(tokens).metadata.num_rows
        print(
            f"analyze: {inside:.1f} s inside the child "
            f"({wall:.1f} s with interpreter start-up), peak RSS {peak_mib:.0f} MiB "
            f"(largest forked process, a join worker or the figures' aside: "
            f"{worker_kib / 1024:.0f} MiB, pages shared with it counted in both), "
            f"CPU {cpu:.1f} s (user+system), tokens.parquet {size:.1f} MiB, "
            f"bootstrap {args.bootstrap}, jobs {args.jobs or 'one per core'}"
        )
        if tree.samples:
            print(
                f"whole analysis (analyze and its forked processes, proportional set size, "
                f"sampled every {tree.every} s, {tree.samples} samples): peak "
                f"{tree.peak_kib / 1024:.0f} MiB; per stage of analyze:"
            )
            print("\n".join(_per_stage(stderr, tree.timeline, time.time())))
        # peak memory over events (libraries included: compare two sizes for the slope)
        print(f"{events:,} events: {maxrss_kib * 1024 / events:.0f} bytes of peak RSS per event")
        # The machine may be shared: its load says how far wall time is to be trusted.
        print(f"load average before {load_before}, after {_load()} ({os.cpu_count()} CPUs)")
        if args.request_figures:
            _measure_counts(root / "out", args.bootstrap, events, args.memory)


def _measure_counts(analysis: Path, n_boot: int, events: int, memory: str | None) -> None:
    """Each step of :func:`_counts_child` in a process of its own (its peak RSS is its
    own)."""
    measured = {}
    for step in ("stats", "figures"):
        cmd = [sys.executable, __file__, "--bootstrap", str(n_boot)]
        cmd += ["--counts-child", str(analysis), step]
        cmd += ["--memory", memory] if memory else []
        done = subprocess.run(cmd, check=True, capture_output=True, text=True)
        wall, peak_kib, rows, differ = done.stdout.split()[-4:]
        measured[step] = (float(wall), int(peak_kib) / 1024, int(rows), differ)
    (s_wall, s_peak, rows_n, _), (f_wall, f_peak, _, differ) = (
        measured["stats"],
        measured["figures"],
    )
    verdict = "equal summary.json's" if differ == "-" else f"DIFFER from summary.json's: {differ}"
    print(
        f"request-stats --by all (DuckDB{', memory ' + memory if memory else ''}): "
        f"{s_wall:.1f} s, peak RSS {s_peak:.0f} MiB, {len(BY_ALL)} tables of {rows_n:,} rows "
        f"in all for {events:,} events; request-figures of them: {f_wall:.1f} s, peak RSS "
        f"{f_peak:.0f} MiB (bootstrap {n_boot}); every figure it gives (rates, breakdowns, "
        f"gaps, the standardised gap, runs[] with positions and speed, the confidence "
        f"splits, H2 contrast and verdicts with their sensitivity) {verdict}"
    )


if __name__ == "__main__":
    main()
