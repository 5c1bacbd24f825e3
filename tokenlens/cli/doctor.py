"""``tokenlens doctor``: check the environment before a long run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tokenlens.cli.common import formatter, say
from tokenlens.engine.methods import STAND_IN_METHODS

HELP = """\
Check what a long run depends on, one line each (ok / warn / fail, with the fix):
the tokenlens and vLLM versions and the vLLM tier (verified, surface-checked,
untested), whether the capture plugin is registered and its surface check passes on
the live vLLM classes, the platform (CPU/GPU, memory, device count, CUDA), whether
async scheduling will hide rejected drafts' ids for each method and which model runner
vLLM picks (both read from the config vLLM resolves here for the method on stand-in
models, not from a list), whether the embedded models are cached, and PNG export /
browser. Exit status 1 if any line fails.

examples:
  tokenlens doctor
  tokenlens doctor --method mtp --method dflash
  tokenlens doctor --no-import        source-level checks only (no vLLM import)
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "doctor",
        help="check vLLM, the plugin, the platform and the models before a long run",
        description=HELP,
        formatter_class=formatter(),
    )
    p.add_argument(
        "--method",
        action="append",
        help="speculative method to resolve async scheduling and the model runner for "
        f"(repeatable; default: {', '.join(STAND_IN_METHODS)}: the methods with a stand-in "
        "model; others are not resolved)",
    )
    p.add_argument("--cache", type=Path, help="embedded model cache directory")
    p.add_argument(
        "--no-import",
        action="store_true",
        help="skip the checks that import vLLM (live classes, device)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tokenlens.doctor import DoctorConfig, exit_status, render, run_doctor

    checks = run_doctor(
        DoctorConfig(
            methods=tuple(args.method) if args.method else STAND_IN_METHODS,
            cache=args.cache,
            import_vllm=not args.no_import,
        )
    )
    say(render(checks))
    return exit_status(checks)
