#!/usr/bin/env bash
# Regenerate docs/labeled-suite-report.png: the labeled suite's HTML report in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q
T=$(mktemp -d)
./target/release/kopt analyze fixtures/labeled-suite-h100/ncu_raw_base.csv --format html -o "$T/report.html"
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$T/profile" --window-size=1280,2000 \
  --screenshot="$PWD/docs/labeled-suite-report.png" "file://$T/report.html" 2>/dev/null
echo "docs/labeled-suite-report.png"
