#!/usr/bin/env bash
# The whole test suite, from a fresh clone: set up the locked environment, build the
# embedded models into the cache (skipped when cached), lint, type-check, and run
# every test, including the real vLLM CPU runs.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
# Headless Chromium for the report browser tests (Debian package; needs root/apt).
if ! bash scripts/install_chromium.sh; then
  echo "test: could not install chromium; the browser test will skip unless TOKENLENS_REQUIRE_BROWSER=1" >&2
fi
.venv/bin/tokenlens models ensure
.venv/bin/ruff check tokenlens tests benchmarks scripts
.venv/bin/ruff format --check tokenlens tests benchmarks scripts
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
