#!/usr/bin/env bash
# Install Debian's headless-capable Chromium for the report browser tests
# (tests/report/test_browser.py). Idempotent: does nothing when it is already there.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-noto-cjk >/dev/null
command -v chromium >/dev/null
