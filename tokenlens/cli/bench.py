"""``tokenlens bench``: the speed matrix of a plan."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tokenlens.cli.common import add_progress_flag, formatter, plan_file, progress_for, say
from tokenlens.errors import Interrupted, TokenlensError, interruption

HELP = """\
Measure decoding speed for every case of a TOML plan: models x speculative methods
x k x corpus x length x language. Each case gets warm-up runs, then measured repeats;
per repeat tok/s (output tokens / wall time), characters/s and UTF-8 bytes/s of the
output text and time to first token; per case the median and min-max, and vLLM's
acceptance rate, mean acceptance length and per-position acceptance taken from its
own counters (differenced around the case). One engine serves every case that shares
a model and speculative config. Every case also leaves a traced run directory that
`tokenlens analyze` reads.

An interrupted bench resumes where it stopped: run the same command again (finished
cases are never re-run). --restart discards earlier results in --out.

Outputs: OUT/results.csv (one row per case, columns in docs/bench.md), OUT/results.md
(tables to paste: tok/s, chars/s, acceptance, speedup, EN/JA ratio), OUT/report.html,
OUT/runs/<case>/ (run directories), OUT/logs/ (vLLM's logs), OUT/bench.json.

Plans: plans/demo-cpu.toml (embedded Qwen pair on CPU, ~10 min on 2 cores),
plans/qwen35-rtx4070.toml (the original Qwen3.5 MTP/D-Flash series, for a GPU).
The plan format is in docs/bench.md; --check validates a plan against the installed
vLLM's own config definitions and lists its cases without running anything.

--compare-plain runs chosen cases once more on an engine that does not load tokenlens
at all, so you can see for yourself what tracing costs (results.md: traced vs plain).

examples:
  tokenlens bench --plan plans/demo-cpu.toml --out out/bench
  tokenlens bench --plan plans/demo-cpu.toml --out out/bench --compare-plain '*/draft-k3/*'
  tokenlens bench --plan plans/qwen35-rtx4070.toml --check
  tokenlens bench --plan my-server.toml --server http://127.0.0.1:8000 --out out/srv
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="speed matrix of a plan: tok/s, chars/s, acceptance per case",
        description=HELP,
        formatter_class=formatter(),
    )
    p.add_argument(
        "--plan",
        type=plan_file,
        required=True,
        help="TOML plan file, or the name of a shipped plan (demo-cpu, qwen35-rtx4070, ...)",
    )
    p.add_argument("--out", type=Path, help="output directory (required unless --check)")
    p.add_argument(
        "--check",
        action="store_true",
        help="validate the plan (keys, corpora, vLLM's accepted names) and list its cases",
    )
    p.add_argument(
        "--server",
        metavar="URL",
        help="measure a running `vllm serve` (one model/method/k) instead of a local engine",
    )
    p.add_argument(
        "--server-trace-dir",
        type=Path,
        help="the server's TOKENLENS_TRACE_DIR as seen from here (events per case)",
    )
    p.add_argument(
        "--compare-plain",
        nargs="*",
        metavar="CASE",
        help="after the bench, run these cases again on engines without the tokenlens "
        "plugin (VLLM_PLUGINS=''), same settings: results.md shows traced vs plain tok/s. "
        "CASE is a case id or a pattern ('*/draft-k3/*'); none given: every case",
    )
    p.add_argument("--restart", action="store_true", help="discard earlier results in --out")
    p.add_argument("--cache", type=Path, help="embedded model cache directory")
    add_progress_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.check:
        from tokenlens.bench.check import describe_plan

        say(describe_plan(args.plan))
        return 0
    if args.out is None:
        raise TokenlensError("--out is required unless --check (see 'tokenlens bench --help')")
    from tokenlens.bench.config import BenchConfig
    from tokenlens.bench.measure import run_bench

    config = BenchConfig(
        plan=args.plan,
        out=args.out,
        server=args.server,
        server_trace_dir=args.server_trace_dir,
        cache=args.cache,
        restart=args.restart,
        argv=tuple(["tokenlens", *sys.argv[1:]]),
        compare_plain=_plain_patterns(args.compare_plain),
    )
    progress = progress_for(args)
    try:
        result = run_bench(config, progress)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP
        what, signal_number = interruption(exc)
        raise Interrupted(
            f"{what} — finished cases are kept in {args.out}: run the same command "
            "again to continue",
            signal_number,
        ) from None
    progress.close()
    if result.resumed:
        say(f"resumed: {result.resumed} finished cases kept")
    say(f"results:  {result.results_csv}")
    say(f"tables:   {result.results_md}")
    say(f"report:   {_report(result.out)}")
    return 0


def _report(out: Path) -> str:
    """The HTML report's path, or why it was not written: its chart libraries (altair,
    vl-convert) are imported only now, after measuring, so a GPU host without them still
    benches and writes results.csv and results.md."""
    try:
        from tokenlens.report import write_bench_report
    except ImportError as exc:
        return f"not written ({exc.name or exc} is not installed; results.md has the tables)"
    return str(write_bench_report(out))


def _plain_patterns(values: list[str] | None) -> tuple[str, ...]:
    """``--compare-plain``'s patterns: none given means every case; absent means none."""
    if values is None:
        return ()
    return tuple(values) or ("*",)
