#!/usr/bin/env bash
# kopt analyze on a synthesized 50 MB ncu raw CSV vs Python's csv module, same run.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo bench -p kopt --bench analyze_large_csv 2>&1 | sed -n '/^analyze_large_csv/,$p'
