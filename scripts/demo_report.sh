#!/usr/bin/env bash
# Regenerate the committed sample report reports/demo/ from a fresh `tokenlens demo`.
#
#   bash scripts/demo_report.sh [--size medium]     (extra options go to tokenlens demo)
#
# Runs the demo into a scratch directory (models cached under ~/.cache/tokenlens), then
# copies what a reader needs (HTML reports, Markdown, summary.json, results.csv,
# manifests, SVG charts) into reports/demo/. Weights, parquet files and vLLM logs stay
# out of the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh >/dev/null
scratch=${TOKENLENS_DEMO_SCRATCH:-$(mktemp -d /tmp/tokenlens-demo.XXXXXX)}
.venv/bin/tokenlens demo --out "$scratch" "$@"
dest=reports/demo
rm -rf "$dest"
mkdir -p "$dest"
copy() {  # copy paths relative to the scratch directory, keeping their layout
  for rel in "$@"; do
    [ -e "$scratch/$rel" ] || continue
    mkdir -p "$dest/$(dirname "$rel")"
    cp -r "$scratch/$rel" "$dest/$rel"
  done
}
copy index.html FINDINGS.md summary.md
copy bench/report.html bench/results.md bench/results.csv bench/bench.json bench/plan.toml
copy analysis/report.html analysis/summary.json analysis/tables.md
for d in bench/charts analysis/charts; do
  if [ -d "$scratch/$d" ]; then
    mkdir -p "$dest/$d"
    cp "$scratch/$d"/*.svg "$dest/$d/"
  fi
done
for run in "$scratch"/runs/*/; do
  copy "runs/$(basename "$run")/manifest.json" "runs/$(basename "$run")/metrics.json"
done
du -sh "$dest"
echo "sample report: $dest/index.html (from $scratch)"
