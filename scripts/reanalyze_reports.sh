#!/usr/bin/env bash
# Analyse the committed samples again from their committed run directories, after a
# change to the analysis (no vLLM, no traces: `tokenlens demo --reanalyze`):
#
#   bash scripts/reanalyze_reports.sh            (reports/demo and reports/full)
#   bash scripts/reanalyze_reports.sh demo       (one of them)
#
# Rewrites analysis/ (summary.json, tables.md, report.html, charts), FINDINGS.md and
# index.html, then removes what scripts/demo_report.sh leaves out of a committed
# sample (tokens.parquet and outputs.parquet: large and derived; PNG charts; the
# analysis marker). Runs, traces, bench, summary.md and wall.json stay as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(demo full)
for name in "${targets[@]}"; do
  case "$name" in
    demo) size=medium ;;
    full) size=full ;;
    *) echo "unknown sample $name (demo or full)" >&2; exit 2 ;;
  esac
  dir="reports/$name"
  .venv/bin/tokenlens demo --reanalyze --size "$size" --out "$dir"
  rm -f "$dir/analysis/tokens.parquet" "$dir/analysis/outputs.parquet" \
    "$dir/analysis/.tokenlens-analyze.json" "$dir"/analysis/charts/*.png
done
