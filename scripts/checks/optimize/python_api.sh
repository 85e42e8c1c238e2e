#!/usr/bin/env bash
# kopt.optimize in-process on the GPU machine: the wheel built here
# (target/wheels, carried) installed with no index, then python_api.py.
# Usage: scripts/checks/optimize/python_api.sh OUT_DIR
set -euo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
wheel=$(ls -1 target/wheels/kopt-*.whl | tail -n 1)
site=$(mktemp -d)/site
python3 -m pip install --quiet --no-index --no-deps --target "$site" "$wheel"
export PYTHONPATH=$site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/card.txt"
work=$(mktemp -d)
cd "$work"
PYTHONUNBUFFERED=1 python3 "$here/python_api.py" "$work/out" 2>&1 | grep -v "^W1126\|^W11" | tee "$out/python_api.txt"
cp "$work/out/OPTIMIZATIONS.md" "$out/" 2>/dev/null || true
