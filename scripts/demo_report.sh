#!/usr/bin/env bash
# Regenerate the committed sample report reports/demo/ from a fresh `tokenlens demo`.
#
#   bash scripts/demo_report.sh [--size medium]     (extra options go to tokenlens demo)
#
# Runs the demo into a scratch directory (models cached under ~/.cache/tokenlens), then
# copies what a reader needs (HTML reports, Markdown, summary.json, results.csv,
# manifests, SVG charts) into reports/demo/. Each traced run keeps its manifest,
# metrics, requests.parquet and events.parquet (small), so that
#   tokenlens analyze reports/demo/runs/* --bench reports/demo/bench --out DIR
# reproduces the committed analysis; weights, capture step files and vLLM logs stay out.
#
# Environment: TOKENLENS_DEMO_SCRATCH (where the demo writes; default a new temporary
# directory), TOKENLENS_DEMO_REUSE=1 (copy an existing demo output in the scratch
# directory instead of running the demo again), TOKENLENS_DEMO_DEST (default
# reports/demo).
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=${TOKENLENS_DEMO_SCRATCH:-$(mktemp -d /tmp/tokenlens-demo.XXXXXX)}
dest=${TOKENLENS_DEMO_DEST:-reports/demo}
if [ "${TOKENLENS_DEMO_REUSE:-0}" != 1 ]; then
  bash scripts/setup.sh >/dev/null
  .venv/bin/tokenlens demo --out "$scratch" "$@"
fi
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
if [ -d "$scratch/runs" ]; then
  for run in "$scratch"/runs/*/; do
    name=$(basename "$run")
    for file in manifest.json metrics.json requests.parquet events.parquet; do
      copy "runs/$name/$file"
    done
  done
fi
du -sh "$dest"
echo "sample report: $dest/index.html (from $scratch)"
