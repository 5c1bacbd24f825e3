#!/usr/bin/env bash
# Install Debian's headless-capable Chromium and its WebDriver (chromium-driver, which
# Selenium drives) for the report browser tests (tests/report/test_browser.py), and a
# CJK font. Idempotent: does nothing when both are already there.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-noto-cjk >/dev/null
command -v chromium >/dev/null
command -v chromedriver >/dev/null
