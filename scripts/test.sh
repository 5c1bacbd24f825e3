#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set up the locked environment, build the
# embedded models into the cache (skipped when cached), fetch vLLM 0.34.0's sources,
# lint, type-check, and run every test, including the real vLLM CPU runs.
#
# Tests run in two parts: the fast part (-m "not vllm": no engine, no model build) on
# two pytest-xdist workers (a file's tests on one worker, so that module fixtures are
# built once), then the engine part (-m vllm) serially, since every engine
# binds all cores. Both print their 30 slowest tests and their wall time; the engine
# part also prints how many engines started and how many loaded the real pair. With
# arguments, pytest runs once with them instead (e.g. `bash scripts/test.sh tests/text`).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
# Headless Chromium for the report browser tests (Debian package; needs root/apt).
if ! bash scripts/install_chromium.sh; then
  echo "test: could not install chromium; the browser test will skip unless TOKENLENS_REQUIRE_BROWSER=1" >&2
fi
.venv/bin/tokenlens models ensure
# vLLM 0.34.0's pure-Python sources (its wheel without *.so, ~240 MB download once), so
# tests/capture/test_scheduler_releases.py drives the newest release's real Scheduler
# and AsyncScheduler instead of skipping. A failed download fails the run.
if [ ! -f "${TOKENLENS_CACHE:-$HOME/.cache/tokenlens}/vllm-src/0.34.0/vllm/v1/core/sched/scheduler.py" ]; then
  PYTHON=.venv/bin/python bash scripts/vllm_source_tree.sh 0.34.0
fi
.venv/bin/ruff check tokenlens tests benchmarks scripts
.venv/bin/ruff format --check tokenlens tests benchmarks scripts
.venv/bin/mypy
echo "test: set-up, models, lint and types took ${SECONDS} s"
if [ "$#" -gt 0 ]; then
  exec .venv/bin/python -m pytest --durations=30 "$@"
fi
status=0
start=$SECONDS
.venv/bin/python -m pytest -m "not vllm" -n 2 --dist loadfile --durations=30 || status=$?
echo "test: fast part (-m 'not vllm', 2 workers) took $((SECONDS - start)) s"
start=$SECONDS
.venv/bin/python -m pytest -m vllm --durations=30 || status=$?
echo "test: engine part (-m vllm) took $((SECONDS - start)) s; all of scripts/test.sh ${SECONDS} s"
exit "$status"
