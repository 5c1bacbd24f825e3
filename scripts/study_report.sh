#!/usr/bin/env bash
# Regenerate the committed verdict-grade study reports/full/ (docs/study.md): runs
# `tokenlens demo --size full` (~40 min on 2 CPU cores with cached models) and copies its
# outputs with scripts/demo_report.sh (same environment variables; extra options go to
# tokenlens demo).
#
#   bash scripts/study_report.sh
#   TOKENLENS_DEMO_SCRATCH=/work/runs/full TOKENLENS_DEMO_REUSE=1 bash scripts/study_report.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export TOKENLENS_DEMO_DEST=${TOKENLENS_DEMO_DEST:-reports/full}
exec bash scripts/demo_report.sh --size full "$@"
