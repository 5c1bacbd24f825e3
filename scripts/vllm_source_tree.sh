#!/usr/bin/env bash
# Unpack another vLLM release's pure-Python sources for the scheduler-level tests.
#
#   bash scripts/vllm_source_tree.sh 0.34.0          # -> ~/.cache/tokenlens/vllm-src/0.34.0
#   bash scripts/vllm_source_tree.sh 0.34.0 DIR      # -> DIR/0.34.0
#
# The release's GPU wheel (`pip download --no-deps --only-binary :all: vllm==VERSION`,
# ~240 MB) needs a torch this machine does not have, so it cannot be installed here. Its
# scheduler is plain Python, though: this unpacks the wheel without its compiled
# libraries (*.so), and tests/capture/test_scheduler_releases.py then runs
# tests/capture/test_scheduler_matrix.py with that tree first on the path (the shared
# venv's torch and transformers underneath, VLLM_TARGET_DEVICE=cpu), so the hook is
# tested against the release's REAL Scheduler and AsyncScheduler. It also prints the
# release's surface check (scripts/check_vllm_surface.py).
set -euo pipefail

VERSION="${1:?usage: vllm_source_tree.sh VERSION [DIR]}"
DEST_ROOT="${2:-${TOKENLENS_CACHE:-$HOME/.cache/tokenlens}/vllm-src}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
DEST="$DEST_ROOT/$VERSION"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/vllm-wheel.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

"$PY" -m pip download --quiet --no-deps --only-binary :all: "vllm==$VERSION" -d "$WORK" \
    2>&1 | grep -v "is ignored: it is neither" || true
WHEEL="$(ls "$WORK"/vllm-"$VERSION"-*.whl 2>/dev/null | head -1)"
if [[ -z "$WHEEL" ]]; then
    echo "vllm_source_tree: no wheel of vllm $VERSION could be downloaded" >&2
    exit 1
fi
rm -rf "$DEST.tmp"
mkdir -p "$DEST.tmp"
"$PY" - "$WHEEL" "$DEST.tmp" <<'EOF'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as archive:
    names = [n for n in archive.namelist() if not n.endswith(".so")]
    archive.extractall(dest, names)
print(f"vllm_source_tree: {len(names)} files from {wheel.rsplit('/', 1)[-1]}")
EOF
rm -rf "$DEST"
mv "$DEST.tmp" "$DEST"
echo "vllm_source_tree: $DEST"
"$PY" "$ROOT/scripts/check_vllm_surface.py" "$DEST/vllm" | tail -3
