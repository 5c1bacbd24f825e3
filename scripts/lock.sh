#!/usr/bin/env bash
# Regenerate requirements/cpu.lock from the current .venv (after changing a pin in
# pyproject.toml and installing it). Keeps torchvision/torchaudio/torchcodec out.
set -euo pipefail
cd "$(dirname "$0")/.."
{
  head -4 requirements/cpu.lock
  .venv/bin/pip freeze --all | grep -v -iE "^pip==|^-e |^tokenlens|^torchvision|^torchaudio|^torchcodec" \
    | sed 's/^torch==2.13.0+cpu$/torch==2.13.0/'
} > requirements/cpu.lock.new
mv requirements/cpu.lock.new requirements/cpu.lock
