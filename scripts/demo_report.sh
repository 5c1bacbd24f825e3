#!/usr/bin/env bash
# Regenerate the committed sample report reports/demo/ from a fresh `tokenlens demo`.
#
#   bash scripts/demo_report.sh [--size medium]     (extra options go to tokenlens demo)
#   bash scripts/study_report.sh                    (the full study into reports/full/)
#
# Runs the demo into a scratch directory (models cached under ~/.cache/tokenlens), then
# copies what a reader needs (HTML reports, Markdown, summary.json, results.csv,
# manifests, SVG charts) into reports/demo/. Each traced run keeps its manifest,
# metrics, requests.parquet and events.parquet (small), so that
#   tokenlens analyze reports/demo/runs/* --bench reports/demo/bench --out DIR
# reproduces the committed analysis; weights, capture step files and vLLM logs stay out.
# The full size also has traces/ (the real traces: the replay's source and its check;
# same four files), wall.json (seconds per stage), prompts.jsonl (what was traced) and
# replay/check.json (the replay against the traces);
# its tokens.parquet, outputs.parquet and the replay's predictions.parquet stay out (large,
# derived).
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
copy index.html FINDINGS.md summary.md wall.json prompts.jsonl replay/check.json
copy bench/report.html bench/results.md bench/results.csv bench/bench.json bench/plan.toml
copy analysis/report.html analysis/summary.json analysis/tables.md
for d in bench/charts analysis/charts; do
  if [ -d "$scratch/$d" ]; then
    mkdir -p "$dest/$d"
    cp "$scratch/$d"/*.svg "$dest/$d/"
  fi
done
for top in runs traces; do
  [ -d "$scratch/$top" ] || continue
  for run in "$scratch/$top"/*/; do
    name=$(basename "$run")
    for file in manifest.json metrics.json requests.parquet events.parquet; do
      copy "$top/$name/$file"
    done
  done
done
du -sh "$dest"
echo "sample report: $dest/index.html (from $scratch)"
