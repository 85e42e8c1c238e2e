#!/usr/bin/env bash
# Kernels traced back to framework ops on a real model (GPU machine,
# target/release/kopt and libkopt_tracer.so carried): GPT-2 prefill profiled
# with --ops. Usage: scripts/checks/ops/run.sh OUT_DIR
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
kopt=$PWD/target/release/kopt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/card.txt"
cd "$out"
"$kopt" profile --script "$here/gpt2_prefill.py" --module gpt2 --ops --runs-dir runs --db h.db -q \
  --timeout 500 -f md -o gpt2.md > gpt2.log 2>&1
echo "exit $?" >> gpt2.log
run=$(ls -td runs/*/ | head -1)
cp "$run/report.json" gpt2.report.json 2>/dev/null
gzip -9c "$run/trace.jsonl" > gpt2.trace.jsonl.gz 2>/dev/null
sed -n '1,60p' gpt2.md
rm -rf runs h.db
