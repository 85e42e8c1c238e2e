#!/usr/bin/env bash
# Build the `kopt` Python wheel (abi3: one wheel for Python 3.9+) with kopt's
# CUPTI tracer library inside. Needs maturin (pip install 'maturin>=1.9.4').
#   scripts/build_wheel.sh [OUT_DIR]      (default: target/wheels)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/wheels}
# kopt-py's build script builds the tracer and puts it into the package.
maturin build --release --quiet -m crates/kopt-py/Cargo.toml -o "$out"
ls -1 "$out"/kopt-*.whl | tail -n 1
