#!/usr/bin/env python3
"""Check a vLLM release against what the tokenlens capture hook assumes, without importing it.

    python scripts/check_vllm_surface.py PATH [--record TIER] [--json FILE]

PATH is a vLLM wheel (``pip download --no-deps --only-binary :all: vllm==X``) or a
``vllm/`` directory (an installed one, or a source checkout). The sources are read
with ``ast`` (no import, no torch, no GPU), every assumption is reported as holds /
broken (optional ones: absent), and the surface fingerprint is printed.
``--record verified|surface-checked`` writes the fingerprint into
``tokenlens/capture/vllm_surfaces.json``, which sets the tier of that release in every
trace. Exit status 1 when a required assumption is broken.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tokenlens.capture.surface import check_path, iter_table  # noqa: E402
from tokenlens.capture.tiers import RECORDED, SURFACE_CHECKED, VERIFIED, tier_for  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="a vLLM wheel or a vllm/ directory")
    parser.add_argument("--record", choices=(VERIFIED, SURFACE_CHECKED), help="record the result")
    parser.add_argument("--json", type=Path, help="write the full report as JSON")
    args = parser.parse_args()
    try:
        report = check_path(args.path)
    except FileNotFoundError as exc:
        print(f"check_vllm_surface: {exc}", file=sys.stderr)
        return 2
    print(f"vLLM {report.version} ({args.path.name})")
    print()
    print("| assumption | state | detail |")
    print("|---|---|---|")
    for name, state, detail in iter_table(report):
        print(f"| {name} | {state} | {detail} |")
    print()
    print(f"fingerprint: {report.fingerprint or '(none: a required assumption is broken)'}")
    print(f"tier today: {tier_for(report.version, report).name}")
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    if args.record is not None:
        if not report.ok or report.version is None:
            print("check_vllm_surface: not recorded: the surface check failed", file=sys.stderr)
            return 1
        data = json.loads(RECORDED.read_text(encoding="utf-8"))
        entry = data["releases"].setdefault(report.version, {"sources": []})
        entry.update(
            tier=args.record,
            fingerprint=report.fingerprint,
            checked=datetime.date.today().isoformat(),
        )
        if args.path.name not in " ".join(entry["sources"]):
            entry["sources"].append(args.path.name)
        RECORDED.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
        print(f"recorded {report.version} as {args.record} in {RECORDED.relative_to(ROOT)}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
